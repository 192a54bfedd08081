package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	apisv1 "github.com/karpx/karpx/apis/v1"
	kxlint "github.com/karpx/karpx/lint"
	"github.com/karpx/karpx/lint/crdschema"
	"github.com/karpx/karpx/plugin/cluster"
	"github.com/karpx/karpx/plugin/lint"
	"github.com/karpx/karpx/plugin/output"
	"github.com/karpx/karpx/plugin/runner"
	"github.com/karpx/karpx/plugin/table"
)

// ReportKind is the kind -o json and -o yaml print the report as, with
// apiVersion output.APIVersion (karpx.io/v1alpha1).
const ReportKind = "AuditReport"

// ClusterSource is the Source of findings on live objects (files keep
// their path).
const ClusterSource = "cluster"

// Output formats besides the table: -o json, yaml (the AuditReport) and
// sarif (a SARIF 2.1.0 log).
const (
	OutputJSON  = "json"
	OutputYAML  = "yaml"
	OutputSARIF = "sarif"
)

// Options are the inputs of `kubectl karpx audit`.
type Options struct {
	genericiooptions.IOStreams
	// Factory gives the cluster client (kubectl's global flags).
	Factory cluster.Factory

	// Filenames are files or directories of manifests (-f) checked with
	// the live objects; their nodeClassRefs may name live EC2NodeClasses.
	Filenames []string
	// Recursive descends into subdirectories of -f directories (-R).
	Recursive bool
	// NoCluster skips reading the cluster (-f only, for CI without a
	// kubeconfig).
	NoCluster bool
	// Output is -o: "" or wide (table), json, yaml or sarif.
	Output string
	// FailOn is the least severity that makes the command exit 1: "deny"
	// (default) or "warning".
	FailOn string
	// Disable lists rule IDs ("KX101") whose findings are dropped.
	Disable []string
	// UninspectableCommands is what a command karpx cannot determine
	// does: "deny" (default) or "warn" (--uninspectable-commands).
	UninspectableCommands string
	// NoHeaders omits the table header.
	NoHeaders bool

	disabled   map[string]bool
	unresolved kxlint.Severity
}

// UsageError is a bad flag value: exit status 2, nothing was read.
type UsageError struct{ Err error }

// Error implements error.
func (e *UsageError) Error() string { return e.Err.Error() }

// ExitCode is 2.
func (e *UsageError) ExitCode() int { return 2 }

// FindingsError is returned by Run after the report is written when a
// finding is at or above --fail-on: exit status 1.
type FindingsError struct {
	// Denials and Warnings count the findings by severity.
	Denials, Warnings int
	// FailOn is the --fail-on value.
	FailOn string
}

// Error implements error.
func (e *FindingsError) Error() string {
	return fmt.Sprintf("%d denial(s) and %d warning(s) found (--fail-on=%s)", e.Denials, e.Warnings, e.FailOn)
}

// ExitCode is 1.
func (e *FindingsError) ExitCode() int { return 1 }

// NothingCheckedError is returned by Run when there was no NodePool or
// EC2NodeClass to check, in the cluster or the files: exit status 2, so
// that CI notices an audit of the wrong cluster.
type NothingCheckedError struct{}

// Error implements error.
func (e *NothingCheckedError) Error() string {
	return "nothing checked: no NodePool (karpenter.sh/v1) or EC2NodeClass (karpenter.k8s.aws/v1) in the cluster or the files"
}

// ExitCode is 2.
func (e *NothingCheckedError) ExitCode() int { return 2 }

// InputError is returned by Run when a -f input could not be read (after
// the report has been written): exit status 1.
type InputError struct{ Errors []kxlint.InputError }

// Error implements error.
func (e *InputError) Error() string {
	msgs := make([]string, len(e.Errors))
	for i := range e.Errors {
		msgs[i] = lint.Sanitize(e.Errors[i].Error())
	}
	return "cannot read input: " + strings.Join(msgs, "; ")
}

// ExitCode is 1.
func (e *InputError) ExitCode() int { return 1 }

// Report is the -o json and -o yaml output: lint's results, without its
// input errors (audit returns those as *InputError).
type Report struct {
	// APIVersion and Kind are output.APIVersion and ReportKind.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Results are the objects checked, the findings (Source "cluster" for
	// live objects) and the -f documents skipped; their fields print
	// inline.
	lint.Results
}

const long = `Check every live NodePool and EC2NodeClass with the karpx admission rules.

Objects admitted before a rule existed, created while the webhook was
disabled, or on a cluster run by upstream Karpenter (no karpx webhook) are
checked with the same rules as the webhook and kubectl karpx lint; each
finding names the rule, the object and the field. -f adds manifests from
files or directories (their nodeClassRefs may name live EC2NodeClasses);
--no-cluster checks only those.

Output: a table (-o wide adds the fix), an AuditReport (karpx.io/v1alpha1)
with -o json or yaml, or a SARIF 2.1.0 log with -o sarif for CI and
code-scanning tools.

Exit status: 0 when no finding reaches --fail-on (deny by default), 1 when
one does or input cannot be read, 2 when there is nothing to check or a flag
is wrong. The rules are documented in docs/rules.md.`

const example = `  # Audit the current cluster
  kubectl karpx audit

  # SARIF for code scanning, failing on warnings too
  kubectl karpx audit -o sarif --fail-on=warning > karpx.sarif

  # Live objects plus the manifests about to be applied
  kubectl karpx audit -f manifests/ -R`

// NewCmd returns the `audit` command reading the cluster through f.
func NewCmd(f cluster.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{IOStreams: streams, Factory: f, FailOn: string(kxlint.SeverityDeny)}
	cmd := &cobra.Command{
		Use:     "audit [-f FILENAME|DIRECTORY] [-o wide|json|yaml|sarif] [--fail-on=deny|warning]",
		Short:   "Check live NodePools and EC2NodeClasses with the webhook's rules",
		Long:    long,
		Example: example,
		Args:    cobra.NoArgs,
		RunE:    runner.RunE(o),
	}
	fl := cmd.Flags()
	fl.StringSliceVarP(&o.Filenames, "filename", "f", nil, "Manifest file or directory to check with the live objects; repeatable")
	fl.BoolVarP(&o.Recursive, "recursive", "R", false, "Process -f directories recursively")
	fl.BoolVar(&o.NoCluster, "no-cluster", false, "Check only the -f manifests; do not read the cluster")
	fl.StringVarP(&o.Output, "output", "o", "", "Output format. One of: (json, sarif, wide, yaml).")
	fl.StringVar(&o.FailOn, "fail-on", o.FailOn, "Least severity that makes the command exit 1: deny or warning")
	fl.StringSliceVar(&o.Disable, "disable", nil, "Rule IDs to skip, e.g. KX101,KX102")
	fl.StringVar(&o.UninspectableCommands, "uninspectable-commands", "deny", kxlint.UnresolvedFlagUsage)
	fl.BoolVar(&o.NoHeaders, "no-headers", false, "When using the default or wide output format, don't print headers.")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "sarif", "wide", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("fail-on", cobra.FixedCompletions([]string{"deny", "warning"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// Complete builds the disabled rule set.
func (o *Options) Complete(_ *cobra.Command, _ []string) error {
	o.disabled = map[string]bool{}
	for _, id := range o.Disable {
		o.disabled[strings.ToUpper(strings.TrimSpace(id))] = true
	}
	return nil
}

// Validate checks -o, --fail-on, --disable, --uninspectable-commands and
// that --no-cluster has -f.
// Errors are *UsageError.
func (o *Options) Validate() error {
	switch o.Output {
	case "", output.Wide, OutputJSON, OutputYAML, OutputSARIF:
	default:
		return &UsageError{fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: json,sarif,wide,yaml", o.Output)}
	}
	switch o.FailOn {
	case string(kxlint.SeverityDeny), string(kxlint.SeverityWarning):
	default:
		return &UsageError{fmt.Errorf("--fail-on: %q is not deny or warning", o.FailOn)}
	}
	for id := range o.disabled {
		if _, ok := kxlint.RuleByID(id); !ok {
			return &UsageError{fmt.Errorf("--disable: unknown rule %q (see kubectl karpx lint --help)", id)}
		}
	}
	if o.NoCluster && len(o.Filenames) == 0 {
		return &UsageError{errors.New("--no-cluster needs -f FILENAME or a directory")}
	}
	sev, err := kxlint.ParseUnresolvedSeverity(o.UninspectableCommands)
	if err != nil {
		return &UsageError{err}
	}
	o.unresolved = sev
	return nil
}

// Run lists the live objects, reads -f, checks everything and writes the
// report. It returns list errors (a missing CRD as
// *cluster.NotInstalledError, RBAC's Forbidden unchanged), then, after
// the report: *InputError, *FindingsError or *NothingCheckedError.
func (o *Options) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var objs []kxlint.Object
	if !o.NoCluster {
		live, err := o.listCluster(ctx)
		if err != nil {
			return err
		}
		objs = append(objs, live...)
	}
	report := Report{APIVersion: output.APIVersion, Kind: ReportKind, Results: lint.NewResults()}
	var inputErrs []kxlint.InputError
	budget := kxlint.NewInputBudget() // bounds the -f input as a whole
	for _, name := range o.Filenames {
		if budget.Spent() {
			break
		}
		got, skipped, errs := readPath(name, o.Recursive, budget)
		objs = append(objs, got...)
		report.Skipped = append(report.Skipped, skipped...)
		inputErrs = append(inputErrs, errs...)
	}
	var schema kxlint.SchemaValidator
	if len(o.Filenames) > 0 {
		v, err := crdschema.Shipped()
		if err != nil {
			return fmt.Errorf("loading the embedded CRDs: %w", err)
		}
		schema = v
	}
	denials, warnings := report.Check(ctx, objs, o.disabled, schema, o.unresolved)
	if err := o.print(&report, denials, warnings); err != nil {
		return err
	}
	switch {
	case len(inputErrs) > 0:
		return &InputError{Errors: inputErrs}
	case denials > 0 || (o.FailOn == string(kxlint.SeverityWarning) && warnings > 0):
		return &FindingsError{Denials: denials, Warnings: warnings, FailOn: o.FailOn}
	case len(objs) == 0:
		return &NothingCheckedError{}
	}
	return nil
}

// listCluster reads every NodePool and EC2NodeClass. On a cluster without
// the EC2NodeClass CRD but with NodePools the NodePools are still checked.
func (o *Options) listCluster(ctx context.Context) ([]kxlint.Object, error) {
	c, err := o.Factory.Client()
	if err != nil {
		return nil, err
	}
	var out []kxlint.Object
	var ncs apisv1.EC2NodeClassList
	ncErr := cluster.ListError(cluster.EC2NodeClassesResource, c.List(ctx, &ncs))
	if ncErr != nil && !cluster.IsNotInstalled(ncErr) {
		return nil, ncErr
	}
	var nps karpv1.NodePoolList
	npErr := cluster.ListError(cluster.NodePoolsResource, c.List(ctx, &nps))
	if npErr != nil && !cluster.IsNotInstalled(npErr) {
		return nil, npErr
	}
	if ncErr != nil && npErr != nil {
		return nil, npErr // neither CRD: not a Karpenter cluster
	}
	sort.Slice(ncs.Items, func(i, j int) bool { return ncs.Items[i].Name < ncs.Items[j].Name })
	sort.Slice(nps.Items, func(i, j int) bool { return nps.Items[i].Name < nps.Items[j].Name })
	for i := range ncs.Items {
		out = append(out, kxlint.Object{Source: ClusterSource, EC2NodeClass: &ncs.Items[i]})
	}
	for i := range nps.Items {
		out = append(out, kxlint.Object{Source: ClusterSource, NodePool: &nps.Items[i]})
	}
	return out, nil
}

// readPath decodes a file or directory (*.yaml, *.yml, *.json) within
// budget; once it is spent, no further file is read.
func readPath(name string, recursive bool, budget *kxlint.InputBudget) ([]kxlint.Object, []kxlint.Skipped, []kxlint.InputError) {
	var objs []kxlint.Object
	var skipped []kxlint.Skipped
	var errs []kxlint.InputError
	readFile := func(p string) {
		if budget.Spent() {
			return
		}
		f, err := os.Open(p)
		if err != nil {
			errs = append(errs, kxlint.InputError{Source: p, Message: err.Error()})
			return
		}
		defer f.Close()
		got, sk, err := budget.DecodeObjects(f, p)
		objs, skipped = append(objs, got...), append(skipped, sk...)
		if err != nil {
			var ie *kxlint.InputError
			if errors.As(err, &ie) {
				errs = append(errs, *ie)
			} else {
				errs = append(errs, kxlint.InputError{Source: p, Message: err.Error()})
			}
		}
	}
	info, err := os.Stat(name)
	if err != nil {
		return nil, nil, []kxlint.InputError{{Source: name, Message: err.Error()}}
	}
	if !info.IsDir() {
		readFile(name)
		return objs, skipped, errs
	}
	files, _ := lint.ManifestFiles(name, recursive, func(p string, err error) error {
		errs = append(errs, kxlint.InputError{Source: p, Message: err.Error()})
		return nil
	})
	for _, f := range files {
		readFile(f)
	}
	return objs, skipped, errs
}

// columns are the findings table's; -o wide adds the fix.
var columns = []metav1.TableColumnDefinition{table.Source, table.Object, table.Severity, table.Rule, table.Field, table.Finding, table.Fix}

// print writes the report in the -o format.
func (o *Options) print(r *Report, denials, warnings int) error {
	switch o.Output {
	case OutputJSON, OutputYAML:
		obj, err := output.Object(ReportKind, r)
		if err != nil {
			return err
		}
		var p printers.ResourcePrinter = &printers.JSONPrinter{}
		if o.Output == OutputYAML {
			p = &printers.YAMLPrinter{}
		}
		return p.PrintObj(obj, o.Out)
	case OutputSARIF:
		return writeSARIF(o.Out, r.Findings)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(o.ErrOut, "warning: %s (document %d) skipped: %s\n", lint.Sanitize(s.Source), s.Document, lint.Sanitize(s.Reason))
	}
	if len(r.Findings) > 0 {
		t := &metav1.Table{ColumnDefinitions: columns}
		for _, f := range r.Findings {
			src := f.Source
			if f.Document > 0 {
				src = fmt.Sprintf("%s#%d", f.Source, f.Document)
			}
			t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
				lint.Sanitize(src), lint.Sanitize(f.Kind + "/" + f.Name), string(f.Severity), f.RuleID, table.Dash(f.Location()), lint.Sanitize(table.OneLine(f.Message)), lint.Sanitize(table.OneLine(f.Fix)),
			}})
		}
		if err := (table.Printer{Wide: o.Output == output.Wide, NoHeaders: o.NoHeaders}).Print(o.Out, t); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.Out, "%d object(s) checked: %d denial(s), %d warning(s)\n", r.Objects, denials, warnings)
	return nil
}
