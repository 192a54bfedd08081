package docs

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/ec2sim"
	plugincmd "github.com/karpx/karpx/plugin/cmd"
	"github.com/karpx/karpx/webhook"
)

// repoRoot is the module root, relative to this package's directory.
const repoRoot = "../.."

// externalFlags are flags the docs name that belong to no karpx command,
// each with where it is named and whose it is. Keep it short: a karpx flag
// never belongs here.
var externalFlags = map[string]string{
	// docs/rules.md (generated from the rule table) cites kubectl's own
	// schema validation as the source of KX rules.
	"validate": "kubectl apply/create --validate=strict",
	// README.md and docs/operations.md install, upgrade and roll back
	// charts/karpx and charts/karpx-crd with Helm.
	"install":          "helm upgrade --install",
	"create-namespace": "helm upgrade --install --create-namespace",
	"set":              "helm upgrade --set key=value",
	"reuse-values":     "helm upgrade --reuse-values",
	// docs/operations.md imports the images of `make images`.
	"all-platforms":   "ctr images import --all-platforms",
	"from-oci-layout": "oras cp --from-oci-layout",
	// docs/static-capacity.md scales a static NodePool through the
	// CRD's scale subresource.
	"replicas": "kubectl scale --replicas",
	// docs/rules.md's KX013 names kubelet's flag that lets a node with
	// swap on join.
	"fail-swap-on": "kubelet --fail-swap-on=false",
}

// unit is a piece of a markdown file the checks read: a code span, one
// line of a shell code block (continuation lines joined), or the prose of
// a paragraph with its code spans removed.
type unit struct {
	file string
	line int
	text string
	code bool
}

// shellFence says which fenced code blocks hold commands; the others
// (yaml manifests, userData with its own tools' flags) are not read.
var shellFence = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// units splits a markdown document into units.
func units(file, md string) []unit {
	var out []unit
	lines := strings.Split(md, "\n")
	var para []string
	paraStart := 0
	flush := func() {
		text := strings.Join(para, "\n")
		for _, m := range codeSpan.FindAllStringSubmatchIndex(text, -1) {
			line := paraStart + strings.Count(text[:m[0]], "\n")
			out = append(out, unit{file, line, strings.ReplaceAll(text[m[2]:m[3]], "\n", " "), true})
		}
		if prose := codeSpan.ReplaceAllString(text, " "); strings.TrimSpace(prose) != "" {
			out = append(out, unit{file, paraStart, prose, false})
		}
		para = nil
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if fence, ok := strings.CutPrefix(strings.TrimSpace(l), "```"); ok {
			flush()
			read := shellFence[strings.TrimSpace(fence)]
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				if !read {
					continue
				}
				start, cmd := i, lines[i]
				for strings.HasSuffix(cmd, "\\") && i+1 < len(lines) {
					i++
					cmd = strings.TrimSuffix(cmd, "\\") + " " + lines[i]
				}
				out = append(out, unit{file, start + 1, cmd, true})
			}
			continue
		}
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		if para == nil {
			paraStart = i + 1
		}
		para = append(para, l)
	}
	flush()
	return out
}

// commands are the flag sets the docs' flags are checked against.
type commands struct {
	// binaries maps karpx-controller, karpx-webhook and ec2sim to their flags.
	binaries map[string]map[string]bool
	// plugin is kubectl karpx's root command.
	plugin *cobra.Command
	// union holds every flag of every karpx command and externalFlags.
	union map[string]bool
}

func goFlags(fs *flag.FlagSet) map[string]bool {
	names := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { names[f.Name] = true })
	return names
}

// cobraFlags returns c's own and inherited flags, --help included.
func cobraFlags(c *cobra.Command) map[string]bool {
	c.InitDefaultHelpFlag()
	names := map[string]bool{}
	add := func(f *pflag.Flag) { names[f.Name] = true }
	c.Flags().VisitAll(add)
	c.InheritedFlags().VisitAll(add)
	return names
}

// realCommands builds the flag sets the way the commands' main functions do.
func realCommands() *commands {
	controller := flag.NewFlagSet("karpx-controller", flag.ContinueOnError)
	new(operator.Options).AddFlags(controller)
	new(zap.Options).BindFlags(controller)
	config.RegisterFlags(controller) // controller-runtime's --kubeconfig

	wh := flag.NewFlagSet("karpx-webhook", flag.ContinueOnError)
	new(webhook.CommandFlags).AddFlags(wh)
	new(zap.Options).BindFlags(wh)
	config.RegisterFlags(wh)

	sim := flag.NewFlagSet("ec2sim", flag.ContinueOnError)
	new(ec2sim.CommandFlags).AddFlags(sim)

	return newCommands(map[string]map[string]bool{
		"karpx-controller": goFlags(controller),
		"karpx-webhook":    goFlags(wh),
		"ec2sim":           goFlags(sim),
	}, plugincmd.NewCmdKarpx(genericiooptions.NewTestIOStreamsDiscard()))
}

func newCommands(binaries map[string]map[string]bool, plugin *cobra.Command) *commands {
	c := &commands{binaries: binaries, plugin: plugin, union: map[string]bool{}}
	for _, set := range binaries {
		for f := range set {
			c.union[f] = true
		}
	}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for f := range cobraFlags(cmd) {
			c.union[f] = true
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(plugin)
	for f := range externalFlags {
		c.union[f] = true
	}
	return c
}

var (
	// commandName finds a karpx command in a unit: a binary's name (also
	// as bin/NAME) followed by a space or the end, or kubectl karpx.
	commandName = regexp.MustCompile(`(?:^|[\s/(])(karpx-controller|karpx-webhook|ec2sim|kubectl[ -]karpx)(?:\s|$)`)
	// flagName finds --flag (not ---, not a MIME boundary --//).
	flagName     = regexp.MustCompile(`(?:^|[\s(\[{'"=,;|])--([a-zA-Z][a-zA-Z0-9-]*)`)
	makeCall     = regexp.MustCompile(`(?:^|[\s(;&|])make\s+([^#;&|)]*)`)
	goCall       = regexp.MustCompile(`(?:^|[\s(;&|])go\s+(?:test|run|build|vet|list)\s+([^#;&|)]*)`)
	targetRe     = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	makeRule     = regexp.MustCompile(`(?m)^([A-Za-z0-9][A-Za-z0-9_.-]*)\s*:([^=]|$)`)
	makeVariable = regexp.MustCompile(`(?m)^([A-Z][A-Z0-9_]*)\s*[:?+]?=`)
)

// commandAt returns the name and flags of the karpx command whose name
// comes last before offset in text ("" and nil when none does). For
// kubectl karpx the subcommand words after it select the cobra command.
func (c *commands) commandAt(text string, offset int) (string, map[string]bool) {
	var name string
	var flags map[string]bool
	for _, m := range commandName.FindAllStringSubmatchIndex(text, -1) {
		if m[2] >= offset {
			break
		}
		bin := text[m[2]:m[3]]
		if set, ok := c.binaries[bin]; ok {
			name, flags = bin, set
			continue
		}
		cmd := c.plugin
		for _, word := range strings.Fields(text[m[3]:]) {
			sub := findSub(cmd, word)
			if sub == nil {
				break
			}
			cmd = sub
		}
		name, flags = "kubectl karpx"+strings.TrimPrefix(cmd.CommandPath(), c.plugin.CommandPath()), cobraFlags(cmd)
	}
	return name, flags
}

func findSub(cmd *cobra.Command, word string) *cobra.Command {
	for _, sub := range cmd.Commands() {
		if sub.Name() == word || sub.HasAlias(word) {
			return sub
		}
	}
	return nil
}

// check returns one line per drift between the docs (file name → text)
// and the code: an unknown flag, make target or Go package directory.
// checked counts the flags, targets and packages looked at.
func check(docs map[string]string, c *commands, mk makefile, pkgs packageFuncs) (problems []string, checked int) {
	names := make([]string, 0, len(docs))
	for name := range docs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, file := range names {
		for _, u := range units(file, docs[file]) {
			for _, m := range flagName.FindAllStringSubmatchIndex(u.text, -1) {
				checked++
				f := u.text[m[2]:m[3]]
				if u.code {
					if name, set := c.commandAt(u.text, m[0]); set != nil {
						if !set[f] {
							problems = append(problems, fmt.Sprintf("%s:%d: --%s is not a flag of %s (in %q)", u.file, u.line, f, name, u.text))
						}
						continue
					}
				}
				if !c.union[f] {
					problems = append(problems, fmt.Sprintf("%s:%d: --%s is not a flag of any karpx command (nor a known external one)", u.file, u.line, f))
				}
			}
			if !u.code {
				continue
			}
			for _, m := range makeCall.FindAllStringSubmatch(u.text, -1) {
				for _, word := range strings.Fields(m[1]) {
					if strings.HasPrefix(word, "-") {
						continue // an option
					}
					if name, _, ok := strings.Cut(word, "="); ok {
						checked++
						if !mk.variables[name] {
							problems = append(problems, fmt.Sprintf("%s:%d: make %s: the Makefile defines no variable %s (in %q)", u.file, u.line, word, name, u.text))
						}
						continue
					}
					if !targetRe.MatchString(word) {
						break
					}
					checked++
					if !mk.targets[word] {
						problems = append(problems, fmt.Sprintf("%s:%d: make %s: no such target in the Makefile (in %q)", u.file, u.line, word, u.text))
					}
				}
			}
			for _, m := range goCall.FindAllStringSubmatch(u.text, -1) {
				problems = append(problems, checkGoCommand(u, strings.Fields(m[1]), pkgs, &checked)...)
			}
		}
	}
	return problems, checked
}

// packageFuncs returns the names of the Test, Benchmark, Fuzz and Example
// functions in the _test.go files of dir (relative to the module root, as
// ./a/b) and whether dir exists.
type packageFuncs func(dir string) (funcs []string, ok bool)

// checkGoCommand checks the arguments of a go test/run/build command: its
// ./dir packages exist and, for one package, its -run and -bench patterns
// match a test or benchmark there (placeholders like NAME and the
// match-nothing '^$' are left alone; so are TestX<Fault> templates).
func checkGoCommand(u unit, words []string, pkgs packageFuncs, checked *int) []string {
	var problems []string
	var funcs []string
	var dirs int
	patterns := map[string]string{} // -run/-bench → pattern
	for i, word := range words {
		if strings.HasPrefix(word, "./") {
			*checked++
			dir := strings.TrimSuffix(strings.TrimSuffix(word, "..."), "/")
			names, ok := pkgs(dir)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: no such package directory (in %q)", u.file, u.line, word, u.text))
				continue
			}
			if strings.HasSuffix(word, "...") {
				dirs = 2 // patterns over many packages are not checked
			}
			dirs++
			funcs = append(funcs, names...)
			continue
		}
		for _, opt := range []string{"-run", "-bench"} {
			if v, ok := strings.CutPrefix(word, opt+"="); ok {
				patterns[opt] = v
			} else if word == opt && i+1 < len(words) {
				patterns[opt] = words[i+1]
			}
		}
	}
	if dirs != 1 {
		return problems
	}
	for _, opt := range []string{"-run", "-bench"} {
		pattern, ok := patterns[opt]
		if !ok {
			continue
		}
		pattern = strings.Trim(pattern, `'"`)
		if pattern == "^$" || strings.ToUpper(pattern) == pattern || strings.Contains(pattern, "<") {
			continue
		}
		top, _, _ := strings.Cut(pattern, "/") // -run Test/subtest
		re, err := regexp.Compile(top)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s:%d: %s %s: %v (in %q)", u.file, u.line, opt, pattern, err, u.text))
			continue
		}
		*checked++
		found := false
		for _, name := range funcs {
			if (opt == "-bench") == strings.HasPrefix(name, "Benchmark") && re.MatchString(name) {
				found = true
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("%s:%d: %s %s matches no function of the package (in %q)", u.file, u.line, opt, pattern, u.text))
		}
	}
	return problems
}

// makefile is what the docs may name of the Makefile.
type makefile struct {
	// targets are the rules of the form `name:` (pattern rules and
	// variable assignments excluded).
	targets map[string]bool
	// variables are the upper-case variables it assigns (NAME ?= value,
	// :=, = or +=), which `make target NAME=value` overrides.
	variables map[string]bool
}

func parseMakefile(text string) makefile {
	mk := makefile{targets: map[string]bool{}, variables: map[string]bool{}}
	for _, m := range makeRule.FindAllStringSubmatch(text, -1) {
		mk.targets[m[1]] = true
	}
	for _, m := range makeVariable.FindAllStringSubmatch(text, -1) {
		mk.variables[m[1]] = true
	}
	return mk
}

func readDocs(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, path := range append([]string{filepath.Join(repoRoot, "README.md")}, files...) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, path)
		docs[rel] = string(data)
	}
	return docs
}

// TestDocsNameRealFlagsAndTargets checks README.md and docs/*.md against
// the code: every --flag next to a karpx command is a flag of that command
// (kubectl karpx's subcommands resolved through the cobra tree), every
// other --flag is a flag of some karpx command or in externalFlags, every
// `make <target> VAR=value` names a Makefile target and variable, every ./dir of a go command
// exists.
func TestDocsNameRealFlagsAndTargets(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	mk := parseMakefile(string(text))
	if !mk.targets["test"] || !mk.targets["demo"] || len(mk.variables) < 5 {
		t.Fatalf("Makefile targets %v, variables %v: no test and demo targets or hardly any variables, the patterns no longer match", mk.targets, mk.variables)
	}
	testFunc := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz|Example)\w*)\(`)
	pkgs := func(dir string) ([]string, bool) {
		st, err := os.Stat(filepath.Join(repoRoot, dir))
		if err != nil || !st.IsDir() {
			return nil, false
		}
		files, _ := filepath.Glob(filepath.Join(repoRoot, dir, "*_test.go"))
		var names []string
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range testFunc.FindAllStringSubmatch(string(data), -1) {
				names = append(names, m[1])
			}
		}
		return names, true
	}
	problems, checked := check(readDocs(t), realCommands(), mk, pkgs)
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("checked %d flags, make targets and package directories", checked)
	// The docs name dozens of flags and targets; far fewer means the
	// parsing broke, not that the docs are clean.
	if checked < 50 {
		t.Errorf("checked only %d flags, targets and packages: markdown parsing broken?", checked)
	}
}

// TestCheckFindsDrift is the control: a made-up document with one right
// and one wrong use of each kind yields exactly the wrong ones.
func TestCheckFindsDrift(t *testing.T) {
	root := &cobra.Command{Use: "karpx"}
	root.PersistentFlags().String("context", "", "")
	lint := &cobra.Command{Use: "lint", Run: func(*cobra.Command, []string) {}}
	lint.Flags().String("disable", "", "")
	root.AddCommand(lint)
	c := newCommands(map[string]map[string]bool{
		"karpx-controller": {"gc-grace": true},
		"ec2sim":           {"neighbours": true},
	}, root)
	doc := "# x\n\nRun `ec2sim --neighbours 0.6` or `ec2sim --gc-grace 1m`; set\n`--gc-grace 1h --no-such\n--validate=strict`.\n\n" +
		"```sh\nmake test N=1 M=2  # fine\nmake tset O=3\nkubectl karpx lint --disable KX101 --context x --fail-on=deny\nbin/karpx-controller \\\n  --gc-grace=1m --neighbours 1\ngo test ./here/... ./gone -run X\ngo test -run 'TestA$' -bench A ./one\ngo test -run TestC ./one -bench=Missing\n```\n\n" +
		"```yaml\nargs: [--not-checked]\n```\n\nprose --also-wrong, not `make` anything, and a --// boundary.\n"
	mk := parseMakefile("N ?= 1\nM:=2\n.PHONY: test\ntest: build ## t\n\t@echo $(N) $(O)\n%.o: %.c\n")
	problems, _ := check(map[string]string{"x.md": doc}, c, mk, func(d string) ([]string, bool) {
		switch d {
		case "./here":
			return nil, true
		case "./one":
			return []string{"TestA", "TestB", "BenchmarkA"}, true
		}
		return nil, false
	})
	var got []string
	for _, p := range problems {
		// "file:line: <what> …" → "file:line: <what>"
		loc, rest, _ := strings.Cut(p, ": ")
		got = append(got, loc+": "+strings.TrimSuffix(strings.Fields(rest)[0], ":"))
	}
	want := []string{
		"x.md:3: --gc-grace",    // ec2sim has no --gc-grace
		"x.md:4: --no-such",     // in no flag set
		"x.md:9: make",          // make tset
		"x.md:9: make",          // O=3: no such variable
		"x.md:10: --fail-on",    // not a flag of kubectl karpx lint
		"x.md:11: --neighbours", // ec2sim's, not the controller's (continued line)
		"x.md:13: ./gone",
		"x.md:15: -run", // TestC
		"x.md:15: -bench",
		"x.md:22: --also-wrong",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s\n(full: %q)", strings.Join(got, "\n"), strings.Join(want, "\n"), problems)
	}
}
