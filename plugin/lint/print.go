package lint

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/karpx/karpx/plugin/output"
	"github.com/karpx/karpx/plugin/table"
)

// findingColumns are the table's columns; -o wide adds the priority-1 ones.
var findingColumns = []metav1.TableColumnDefinition{
	table.Source,
	{Name: "Doc", Type: "integer", Description: "1-based document index in the source."},
	table.Object, table.Severity, table.Wide(table.Rule), table.Wide(table.Field),
	{Name: "Finding", Type: "string", Description: "Rule, field and message (and the fix unless -o wide shows it)."},
	table.Fix,
}

// print writes the report: through printer (json, yaml, name) when set,
// else the findings table and the summary, with skipped documents and
// input errors as warnings on ErrOut.
func (o *Options) print(printer printers.ResourcePrinter, report *Report, denials, warnings int) error {
	if printer != nil {
		if o.Print.Format() == "name" {
			return printNames(printer, report, o)
		}
		obj, err := output.Object(ReportKind, report)
		if err != nil {
			return err
		}
		return printer.PrintObj(obj, o.Out)
	}
	for _, s := range report.Skipped {
		what := s.Kind
		if s.Name != "" {
			what += "/" + s.Name
		}
		if what != "" {
			what += " "
		}
		fmt.Fprintf(o.ErrOut, "warning: %s (document %d) %sskipped: %s\n", Sanitize(s.Source), s.Document, Sanitize(what), Sanitize(s.Reason))
	}
	for _, e := range report.Errors {
		fmt.Fprintf(o.ErrOut, "error: %s\n", Sanitize(e.Error()))
	}
	if len(report.Findings) > 0 {
		wide := o.Print.IsWide()
		t := &metav1.Table{ColumnDefinitions: findingColumns}
		for _, f := range report.Findings {
			text := f.Finding.String()
			if wide {
				text = f.RuleID + " " + f.Message
			}
			t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
				Sanitize(f.Source), int64(f.Document), Sanitize(f.Kind + "/" + f.Name), string(f.Severity),
				f.RuleID, table.Dash(f.Location()), Sanitize(table.OneLine(text)), table.Dash(Sanitize(table.OneLine(f.Fix))),
			}})
		}
		if err := o.Print.Tables().Print(o.Out, t); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.Out, "%d object(s) checked: %d denial(s), %d warning(s), %d document(s) skipped, %d input error(s)\n",
		report.Objects, denials, warnings, len(report.Skipped), len(report.Errors))
	return nil
}

// apiVersions are the apiVersions of the kinds lint checks.
var apiVersions = map[string]string{"NodePool": "karpenter.sh/v1", "EC2NodeClass": "karpenter.k8s.aws/v1"}

// printNames prints kind.group/name of each object with a finding, once,
// in the order of the findings (-o name).
func printNames(printer printers.ResourcePrinter, report *Report, o *Options) error {
	seen := map[string]bool{}
	for _, f := range report.Findings {
		apiVersion := apiVersions[f.Kind]
		key := apiVersion + "/" + f.Kind + "/" + f.Name
		if seen[key] {
			continue
		}
		seen[key] = true
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(f.Kind)
		u.SetName(Sanitize(f.Name))
		if err := printer.PrintObj(u, o.Out); err != nil {
			return err
		}
	}
	return nil
}
