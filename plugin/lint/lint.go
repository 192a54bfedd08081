package lint

import (
	"context"
	"encoding/json"
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
)

// Output formats accepted by -o.
const (
	OutputText = "text"
	OutputJSON = "json"
)

// DeniedError is returned by Options.Run when at least one finding has
// severity deny, after the report has been written. The plugin root maps
// it to exit status 1 through ExitCode; its message is a one-line summary.
type DeniedError struct {
	// Denials is the number of denying findings (at least 1).
	Denials int
}

// Error implements error.
func (e *DeniedError) Error() string {
	return fmt.Sprintf("%d finding(s) would be denied by the karpx admission webhook", e.Denials)
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
	// Output is OutputText (default) or OutputJSON.
	Output string
	// Disable lists rule IDs ("KX101") whose findings are dropped.
	Disable []string

	disabled map[string]bool
}

// NewOptions returns Options with defaults, writing to streams.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{IOStreams: streams, Output: OutputText}
}

const longHelp = `Check Karpenter NodePool and EC2NodeClass manifests offline with the rules of
the karpx admission webhook.

EC2NodeClass userData is parsed in the format of its AMI family (MIME
multipart, shell, NodeConfig, Bottlerocket TOML, PowerShell) and scanned for
unsafe content; NodePools are checked against the instance-type catalogue,
their disruption budget schedules and their nodeClassRef, which must name an
EC2NodeClass present in the same input.

Exit status: 0 when nothing would be denied (warnings allowed), 1 when a
finding would be denied or the input cannot be read.

Rules:
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
		Use:     "lint -f FILENAME|DIRECTORY|- [-R] [-o text|json] [--disable KX101,...]",
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
	f.StringVarP(&o.Output, "output", "o", o.Output, "Output format: text or json")
	f.StringSliceVar(&o.Disable, "disable", o.Disable, "Rule IDs to skip, e.g. KX101,KX102")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{OutputText, OutputJSON}, cobra.ShellCompDirectiveNoFileComp))
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
// named at most once, and that every disabled rule exists.
func (o *Options) Validate() error {
	if len(o.Filenames) == 0 {
		return fmt.Errorf("no input: give -f FILENAME, a directory, or - for stdin")
	}
	if o.Output != OutputText && o.Output != OutputJSON {
		return fmt.Errorf("unknown output format %q: use text or json", o.Output)
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
	return nil
}

// Report is the JSON output (-o json).
type Report struct {
	// Objects is the number of NodePools and EC2NodeClasses checked.
	Objects int `json:"objects"`
	// Denied is true when any finding has severity deny.
	Denied bool `json:"denied"`
	// Findings lists every finding with its file and document index.
	Findings []kxlint.ObjectFinding `json:"findings"`
}

// Run reads the input, lints it and writes the report to Out. It returns
// a *DeniedError when a finding denies, or an error naming the file that
// cannot be read or decoded.
func (o *Options) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var objs []kxlint.Object
	for _, name := range o.Filenames {
		got, err := o.read(name)
		if err != nil {
			return err
		}
		objs = append(objs, got...)
	}
	findings := kxlint.LintObjects(ctx, objs, o.disabled)
	report := Report{Objects: len(objs), Findings: findings}
	if report.Findings == nil {
		report.Findings = []kxlint.ObjectFinding{}
	}
	denials, warnings := 0, 0
	for _, f := range findings {
		if f.Severity == kxlint.SeverityDeny {
			denials++
		} else {
			warnings++
		}
	}
	report.Denied = denials > 0
	switch o.Output {
	case OutputJSON:
		enc := json.NewEncoder(o.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
	default:
		for _, f := range findings {
			fmt.Fprintf(o.Out, "%s (document %d) %s/%s: %s %s\n", f.Source, f.Document, f.Kind, f.Name, f.Severity, f.Finding.String())
		}
		fmt.Fprintf(o.Out, "%d object(s) checked: %d denial(s), %d warning(s)\n", len(objs), denials, warnings)
	}
	if denials > 0 {
		return &DeniedError{Denials: denials}
	}
	return nil
}

// read decodes one -f argument.
func (o *Options) read(name string) ([]kxlint.Object, error) {
	if name == "-" {
		return kxlint.DecodeObjects(o.In, "-")
	}
	info, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return readFile(name)
	}
	var files []string
	err = filepath.WalkDir(name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != name && !o.Recursive {
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
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []kxlint.Object
	for _, f := range files {
		objs, err := readFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func readFile(name string) ([]kxlint.Object, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return kxlint.DecodeObjects(io.Reader(f), name)
}

// ruleTable renders the rules for the help text.
func ruleTable() string {
	var b strings.Builder
	for _, r := range kxlint.Rules() {
		fmt.Fprintf(&b, "  %s  %-7s  %-12s  %s\n", r.ID, r.Severity, r.Kind, r.Name)
	}
	return b.String()
}
