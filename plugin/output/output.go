package output

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/karpx/karpx/plugin/table"
)

// APIVersion is the apiVersion of the objects karpx's own reports print as
// with -o json and -o yaml: the plugin's output format, not a served API.
const APIVersion = "karpx.io/v1alpha1"

// Wide is the -o value that adds the tables' priority-1 columns.
const Wide = "wide"

// Flags hold -o/--output and --no-headers of one command.
type Flags struct {
	// PrintFlags build the json, yaml and name printers.
	PrintFlags *genericclioptions.PrintFlags
	// NoHeaders omits table headers (default and wide formats).
	NoHeaders bool
	// names is whether -o name has a meaning for the command.
	names bool
	// extra are formats the command handles itself besides "" and "wide"
	// (lint's legacy "text").
	extra []string
}

// NewFlags returns Flags for a command; names says whether -o name is
// accepted (it prints resource/name lines), extra lists formats the
// command prints itself, treated like the default table by Table.
func NewFlags(names bool, extra ...string) *Flags {
	return &Flags{PrintFlags: genericclioptions.NewPrintFlags(""), names: names, extra: extra}
}

// Allowed returns the accepted -o values, sorted: json, yaml, wide and,
// when the command has one, name.
func (f *Flags) Allowed() []string {
	out := []string{"json", "yaml", Wide}
	if f.names {
		out = append(out, "name")
	}
	slices.Sort(out)
	return out
}

// AddFlags binds -o/--output, and --no-headers when noHeaders is true, to
// cmd, with completion of the -o values.
func (f *Flags) AddFlags(cmd *cobra.Command, noHeaders bool) {
	allowed := f.Allowed()
	cmd.Flags().StringVarP(f.PrintFlags.OutputFormat, "output", "o", *f.PrintFlags.OutputFormat,
		fmt.Sprintf("Output format. One of: (%s).", strings.Join(allowed, ", ")))
	if noHeaders {
		cmd.Flags().BoolVar(&f.NoHeaders, "no-headers", f.NoHeaders, "When using the default or wide output format, don't print headers.")
	}
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(allowed, cobra.ShellCompDirectiveNoFileComp))
}

// Format returns the -o value.
func (f *Flags) Format() string { return *f.PrintFlags.OutputFormat }

// IsWide reports -o wide.
func (f *Flags) IsWide() bool { return f.Format() == Wide }

// Tables returns the printer of the command's tables: -o wide and
// --no-headers.
func (f *Flags) Tables() table.Printer {
	return table.Printer{Wide: f.IsWide(), NoHeaders: f.NoHeaders}
}

// Table reports whether the command prints its own table or text: no -o,
// -o wide, or one of the command's extra formats.
func (f *Flags) Table() bool {
	format := f.Format()
	return format == "" || format == Wide || slices.Contains(f.extra, format)
}

// ToPrinter returns the printer of -o json, yaml or name (nil for Table
// formats). An unknown format, or name for a command without names,
// returns a *UnsupportedError carrying kubectl's message.
func (f *Flags) ToPrinter() (printers.ResourcePrinter, error) {
	if f.Table() {
		return nil, nil
	}
	format := f.Format()
	if format != "name" || f.names {
		if p, err := f.PrintFlags.ToPrinter(); err == nil {
			return p, nil
		} else if !genericclioptions.IsNoCompatiblePrinterError(err) {
			return nil, err
		}
	}
	return nil, &UnsupportedError{Format: format, Allowed: f.Allowed()}
}

// PrintObject prints v as kind (see Object) with the printer of -o json,
// yaml or name and returns true; for a table format it prints nothing and
// returns false, for the caller to print its table. Errors are
// ToPrinter's, Object's and the printer's.
func (f *Flags) PrintObject(out io.Writer, kind string, v any) (bool, error) {
	p, err := f.ToPrinter()
	if err != nil || p == nil {
		return false, err
	}
	obj, err := Object(kind, v)
	if err != nil {
		return true, err
	}
	return true, p.PrintObj(obj, out)
}

// UnsupportedError is an -o value the command does not support. Its
// message is kubectl's: `unable to match a printer suitable for the output
// format "name", allowed formats are: json,wide,yaml`. It is a
// command-line mistake (exit status 2).
type UnsupportedError struct {
	// Format is the -o value given.
	Format string
	// Allowed are the accepted values.
	Allowed []string
}

// Error implements error.
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("unable to match a printer suitable for the output format %q, allowed formats are: %s", e.Format, strings.Join(e.Allowed, ","))
}

// ExitCode is the process exit status of a bad -o: 2, as for other
// command-line mistakes.
func (e *UnsupportedError) ExitCode() int { return 2 }

// Object returns v, a pointer to a JSON-serialisable struct, as an unstructured object
// of apiVersion APIVersion and the given kind, for the json and yaml
// printers. The struct's own fields must not be named apiVersion or kind.
func Object(kind string, v any) (*unstructured.Unstructured, error) {
	m, err := toMap(v)
	if err != nil {
		return nil, fmt.Errorf("converting the %s for printing: %w", kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(APIVersion)
	u.SetKind(kind)
	return u, nil
}

// List returns objs as a v1 List of unstructured items, each with its
// apiVersion and kind set from gvks (same length as objs): the shape
// kubectl get prints for -o json and yaml, and the one cli-runtime's name
// printer accepts. As kubectl get (without --show-managed-fields), it
// leaves out metadata.managedFields.
func List(objs []runtime.Object, gvks []schema.GroupVersionKind) (*unstructured.UnstructuredList, error) {
	list := &unstructured.UnstructuredList{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "List",
		"metadata":   map[string]any{"resourceVersion": ""},
	}}
	for i, obj := range objs {
		u, err := toMap(obj)
		if err != nil {
			return nil, err
		}
		item := unstructured.Unstructured{Object: u}
		item.SetGroupVersionKind(gvks[i])
		item.SetManagedFields(nil)
		list.Items = append(list.Items, item)
	}
	return list, nil
}

// toMap returns v's JSON form as a map, with JSON numbers as int64 or
// float64 as unstructured objects hold them. (runtime's
// DefaultUnstructuredConverter leaves the raw bytes of managed fields as
// []byte, which unstructured objects cannot deep-copy.)
func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := utiljson.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}
