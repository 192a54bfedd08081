package lint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	kxlint "github.com/karpx/karpx/lint"
	"github.com/karpx/karpx/lint/crdschema"
	"github.com/karpx/karpx/plugin/output"
)

// OutputText is lint's former name of the default output, still accepted
// by -o.
const OutputText = "text"

// ReportKind is the kind -o json and -o yaml print the Report as, with
// apiVersion output.APIVersion (karpx.io/v1alpha1).
const ReportKind = "LintReport"

// DeniedError is returned by Options.Run when at least one finding has
// severity deny, after the report has been written. The plugin root maps
// it to exit status 1 through ExitCode; its message is a one-line summary.
type DeniedError struct {
	// Denials is the number of denying findings (at least 1).
	Denials int
	// Rules are the rule IDs of the denying findings, sorted, each once.
	Rules []string
}

// Error implements error: who would deny (the API server only for KX011,
// the CRD schema; the webhook for every other rule) and the rules.
func (e *DeniedError) Error() string {
	by, schema := "the karpx admission webhook", false
	for _, id := range e.Rules {
		schema = schema || id == kxlint.RuleCRDSchema
	}
	switch {
	case schema && len(e.Rules) == 1:
		by = "the API server"
	case schema:
		by = "the karpx admission webhook and the API server"
	}
	s := fmt.Sprintf("%d finding(s) would be denied by %s", e.Denials, by)
	if len(e.Rules) > 0 {
		s += " (" + strings.Join(e.Rules, ", ") + ")"
	}
	return s
}

// denialRules returns the sorted rule IDs of fs's denials, each once.
func denialRules(fs []kxlint.ObjectFinding) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range fs {
		if f.Severity == kxlint.SeverityDeny && !seen[f.RuleID] {
			seen[f.RuleID] = true
			out = append(out, f.RuleID)
		}
	}
	sort.Strings(out)
	return out
}

// ExitCode is the process exit status for a denial: 1.
func (e *DeniedError) ExitCode() int { return 1 }

// Options are the inputs of `kubectl karpx lint`.
type Options struct {
	genericiooptions.IOStreams

	// Filenames are files, directories or "-" (standard input), from -f
	// and from positional arguments.
	Filenames []string
	// Recursive descends into subdirectories of directory arguments (-R).
	Recursive bool
	// Print holds -o: "" (or "text") prints a table of findings and a
	// summary line, wide adds the rule, field and fix columns, json and
	// yaml print the Report as a karpx.io/v1alpha1 LintReport, and name
	// prints kind.group/name of each object with a finding.
	Print *output.Flags
	// Disable lists rule IDs ("KX101") whose findings are dropped.
	Disable []string
	// UninspectableCommands is what a command karpx cannot determine
	// does: "deny" (default) or "warn" (--uninspectable-commands).
	UninspectableCommands string

	disabled   map[string]bool
	unresolved kxlint.Severity
}

// NewOptions returns Options with defaults, writing to streams.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{IOStreams: streams, Print: output.NewFlags(true, OutputText)}
}

const longHelp = `Check Karpenter NodePool and EC2NodeClass manifests offline with the rules of
the karpx admission webhook.

EC2NodeClass userData is parsed in the format of its AMI family (MIME
multipart, shell, NodeConfig, Bottlerocket TOML, PowerShell) and scanned for
unsafe content; NodePools are checked against the instance-type catalogue,
their disruption budget schedules and their nodeClassRef, which must name an
EC2NodeClass present in the same input.

Input is read as kubectl reads it: YAML documents separated by "---", JSON
objects back to back, and List kinds. Every document that is not checked
(another kind, karpenter.sh/v1beta1, a misspelt kind, no apiVersion) is
reported with the reason. A document may be at most 7 MiB, the input as a
whole at most 64 MiB and 10,000 documents (List items included), and Lists
may nest 4 deep; past a bound, reading stops with an error naming it. Each object is
also validated offline against its CRD (OpenAPI schema, CEL rules, unknown
fields), so what the API server would reject is rejected here with the
same message (KX011).

Output: a table of findings and a summary line; -o wide adds the rule, the
field and the fix as columns; -o json and -o yaml print a LintReport
(apiVersion karpx.io/v1alpha1) holding the findings, the skipped documents
and the input errors; -o name prints kind.group/name of each object with a
finding, e.g. nodepool.karpenter.sh/default.

Exit status: 0 when nothing would be denied (warnings allowed), 1 when a
finding would be denied or input cannot be read, 2 when the input holds no
NodePool or EC2NodeClass at all.

Rules (each documented with a denied and an admitted example in docs/rules.md):
%s`

const examples = `  # Lint one file
  kubectl karpx lint -f nodepool.yaml

  # Lint a directory tree and produce JSON for CI
  kubectl karpx lint -R -f manifests/ -o json

  # Lint standard input, ignoring the nodeClassRef check
  kustomize build . | kubectl karpx lint -f - --disable KX101`

// NewCmd returns the `lint` command. Register it under the plugin root; Run
// errors (including *DeniedError) are returned from Execute.
func NewCmd(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:     "lint -f FILENAME|DIRECTORY|- [-R] [-o wide|json|yaml|name] [--disable KX101,...]",
		Short:   "Check NodePool and EC2NodeClass manifests offline with the webhook's rules",
		Long:    fmt.Sprintf(longHelp, ruleTable()),
		Example: examples,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(cmd, args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			// From here on errors are findings or I/O, not usage mistakes.
			cmd.SilenceUsage = true
			return o.Run(cmd.Context())
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags binds the options to cmd's flags.
func (o *Options) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringSliceVarP(&o.Filenames, "filename", "f", o.Filenames, "File, directory or - (stdin) to lint; repeatable")
	f.BoolVarP(&o.Recursive, "recursive", "R", o.Recursive, "Process directories given with -f recursively")
	o.Print.AddFlags(cmd, true)
	f.StringSliceVar(&o.Disable, "disable", o.Disable, "Rule IDs to skip, e.g. KX101,KX102")
	f.StringVar(&o.UninspectableCommands, "uninspectable-commands", "deny", kxlint.UnresolvedFlagUsage)
}

// Complete adds positional arguments to Filenames and builds the disabled
// rule set.
func (o *Options) Complete(_ *cobra.Command, args []string) error {
	o.Filenames = append(o.Filenames, args...)
	o.disabled = map[string]bool{}
	for _, id := range o.Disable {
		o.disabled[strings.ToUpper(strings.TrimSpace(id))] = true
	}
	return nil
}

// Validate checks that there is input, that -o is known, that stdin is
// named at most once, that every disabled rule exists, and reads
// --uninspectable-commands.
func (o *Options) Validate() error {
	if len(o.Filenames) == 0 {
		return fmt.Errorf("no input: give -f FILENAME, a directory, or - for stdin")
	}
	if _, err := o.Print.ToPrinter(); err != nil {
		return err
	}
	stdin := 0
	for _, f := range o.Filenames {
		if f == "-" {
			stdin++
		}
	}
	if stdin > 1 {
		return fmt.Errorf("standard input (-) given %d times", stdin)
	}
	for id := range o.disabled {
		if _, ok := kxlint.RuleByID(id); !ok {
			return fmt.Errorf("--disable: unknown rule %q", id)
		}
	}
	sev, err := kxlint.ParseUnresolvedSeverity(o.UninspectableCommands)
	if err != nil {
		return err
	}
	o.unresolved = sev
	return nil
}

// Report is the -o json and -o yaml output (with apiVersion
// karpx.io/v1alpha1 and kind LintReport), written even when input cannot
// be read.
type Report struct {
	// APIVersion and Kind are output.APIVersion and ReportKind.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Results are the objects checked, the findings and the skipped
	// documents (their fields print inline).
	Results
	// Errors lists input that could not be read.
	Errors []kxlint.InputError `json:"errors"`
}

// Results are what a check of NodePools and EC2NodeClasses found: the body
// of lint's LintReport and of audit's AuditReport.
type Results struct {
	// Objects is the number of NodePools and EC2NodeClasses checked.
	Objects int `json:"objects"`
	// Denied is true when any finding has severity deny.
	Denied bool `json:"denied"`
	// Findings lists every finding; Source is the file ("-" for standard
	// input, "cluster" for a live object) and Document the 1-based
	// document in it (0 for live objects).
	Findings []kxlint.ObjectFinding `json:"findings"`
	// Skipped lists the documents that were not checked, and why.
	Skipped []kxlint.Skipped `json:"skipped"`
}

// NewResults returns empty Results whose lists print as [] rather than
// null.
func NewResults() Results {
	return Results{Findings: []kxlint.ObjectFinding{}, Skipped: []kxlint.Skipped{}}
}

// Check lints objs (rules in disabled skipped; schema, when not nil,
// validates them against their CRDs) into r and returns the number of
// denying and warning findings.
//
// unresolved is the severity of KX009 findings about commands karpx
// cannot determine (kxlint.Finding.Unresolved); "" keeps deny.
func (r *Results) Check(ctx context.Context, objs []kxlint.Object, disabled map[string]bool, schema kxlint.SchemaValidator, unresolved kxlint.Severity) (denials, warnings int) {
	if findings := kxlint.LintObjects(ctx, objs, disabled, schema); findings != nil {
		r.Findings = findings
	}
	for i := range r.Findings {
		r.Findings[i].Finding = r.Findings[i].WithUnresolvedSeverity(unresolved)
	}
	r.Objects = len(objs)
	for _, f := range r.Findings {
		if f.Severity == kxlint.SeverityDeny {
			denials++
		} else {
			warnings++
		}
	}
	r.Denied = denials > 0
	return denials, warnings
}

// InputError is returned by Options.Run when some input could not be read
// (after the report has been written): exit status 1.
type InputError struct {
	// Errors is the number of unreadable inputs (at least 1).
	Errors int
}

// Error implements error.
func (e *InputError) Error() string {
	return fmt.Sprintf("%d input(s) could not be read", e.Errors)
}

// ExitCode is the process exit status: 1.
func (e *InputError) ExitCode() int { return 1 }

// NothingCheckedError is returned by Options.Run when the input held no
// NodePool or EC2NodeClass: exit status 2, so that CI notices a lint run
// over the wrong files.
type NothingCheckedError struct {
	// Skipped is the number of documents skipped.
	Skipped int
}

// Error implements error.
func (e *NothingCheckedError) Error() string {
	return fmt.Sprintf("nothing checked: no NodePool (karpenter.sh/v1) or EC2NodeClass (karpenter.k8s.aws/v1) in the input (%d document(s) skipped)", e.Skipped)
}

// ExitCode is the process exit status: 2.
func (e *NothingCheckedError) ExitCode() int { return 2 }

// Run reads the input, lints it and writes the report to Out (warnings
// about skipped documents and unreadable input go to ErrOut in table mode;
// under -o json and -o yaml everything is in the report on Out). It returns a
// *DeniedError when a finding denies, an *InputError when input could not
// be read, and a *NothingCheckedError when nothing was checked.
func (o *Options) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	schema, err := crdschema.Shipped()
	if err != nil {
		return fmt.Errorf("loading the embedded CRDs: %w", err)
	}
	printer, err := o.Print.ToPrinter()
	if err != nil {
		return err
	}
	report := Report{APIVersion: output.APIVersion, Kind: ReportKind, Results: NewResults(), Errors: []kxlint.InputError{}}
	var objs []kxlint.Object
	budget := kxlint.NewInputBudget() // bounds the input as a whole
	for _, name := range o.Filenames {
		if budget.Spent() {
			break
		}
		o.read(name, budget, &objs, &report)
	}
	denials, warnings := report.Check(ctx, objs, o.disabled, schema, o.unresolved)
	if err := o.print(printer, &report, denials, warnings); err != nil {
		return err
	}
	switch {
	case denials > 0:
		return &DeniedError{Denials: denials, Rules: denialRules(report.Findings)}
	case len(report.Errors) > 0:
		return &InputError{Errors: len(report.Errors)}
	case len(objs) == 0:
		return &NothingCheckedError{Skipped: len(report.Skipped)}
	}
	return nil
}

// read decodes one -f argument into objs within budget, recording skipped
// documents and unreadable input in report; once the budget is spent it
// reads no further file.
func (o *Options) read(name string, budget *kxlint.InputBudget, objs *[]kxlint.Object, report *Report) {
	fail := func(source string, err error) {
		var ie *kxlint.InputError
		if errors.As(err, &ie) {
			report.Errors = append(report.Errors, *ie)
			return
		}
		report.Errors = append(report.Errors, kxlint.InputError{Source: source, Message: shortPathError(err)})
	}
	decode := func(r io.Reader, source string) {
		if budget.Spent() {
			return
		}
		got, skipped, err := budget.DecodeObjects(r, source)
		*objs = append(*objs, got...)
		report.Skipped = append(report.Skipped, skipped...)
		if err != nil {
			fail(source, err)
		}
	}
	if name == "-" {
		decode(o.In, "-")
		return
	}
	info, err := os.Stat(name)
	if err != nil {
		fail(name, err)
		return
	}
	if !info.IsDir() {
		readFile(name, decode, fail)
		return
	}
	files, err := ManifestFiles(name, o.Recursive, func(_ string, err error) error { return err })
	if err != nil {
		fail(name, err)
	}
	for _, f := range files {
		readFile(f, decode, fail)
	}
}

// ManifestFiles returns the manifest files (.yaml, .yml, .json, any case)
// in dir, sorted, and with recursive those of its subdirectories too:
// what lint and audit read from a directory argument. onErr is called with
// each path the walk cannot read; a non-nil return stops the walk and is
// returned with the files found until then.
func ManifestFiles(dir string, recursive bool, onErr func(path string, err error) error) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return onErr(p, err)
		}
		if d.IsDir() {
			if p != dir && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

func readFile(name string, decode func(io.Reader, string), fail func(string, error)) {
	f, err := os.Open(name)
	if err != nil {
		fail(name, err)
		return
	}
	defer f.Close()
	decode(f, name)
}

// shortPathError drops the path that *fs.PathError repeats ("open x: no
// such file or directory" becomes "no such file or directory"), since the
// source is printed next to it.
func shortPathError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// ruleTable renders the rules for the help text.
func ruleTable() string {
	var b strings.Builder
	for _, r := range kxlint.Rules() {
		fmt.Fprintf(&b, "  %s  %-7s  %-12s  %s\n", r.ID, r.Severity, r.Kind, r.Name)
	}
	return b.String()
}
