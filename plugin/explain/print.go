package explain

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/karpx/karpx/plugin/output"
	"github.com/karpx/karpx/plugin/table"
)

// ExplanationAPIVersion and ExplanationKind name the object -o json|yaml
// print: the plugin's output format, not a served API.
const (
	ExplanationAPIVersion = output.APIVersion
	ExplanationKind       = "PodExplanation"
)

// print writes ex: the table with a header line, the chosen NodePool and
// the notes; or, with -o, the PodExplanation (json, yaml) or pod/NAME
// (name).
func (o *Options) print(ex *Explanation) error {
	if o.printer != nil {
		if *o.PrintFlags.OutputFormat == "name" {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: o.PodName, Namespace: o.PodNamespace}}
			pod.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
			return o.printer.PrintObj(pod, o.Out)
		}
		obj, err := ex.Object()
		if err != nil {
			return err
		}
		return o.printer.PrintObj(obj, o.Out)
	}
	switch {
	case !ex.Pending:
		fmt.Fprintf(o.Out, "Pod %s is bound to node %s: not pending. What each NodePool would do for it:\n\n", ex.Pod, ex.NodeName)
	case ex.Scheduler != "":
		fmt.Fprintf(o.Out, "Pod %s is pending (%s)\n\n", ex.Pod, ex.Scheduler)
	default:
		fmt.Fprintf(o.Out, "Pod %s is pending\n\n", ex.Pod)
	}
	if len(ex.NodePools) > 0 {
		if err := (table.Printer{Wide: o.wide, NoHeaders: o.NoHeaders}).Print(o.Out, ex.Table()); err != nil {
			return err
		}
		fmt.Fprintln(o.Out)
	}
	switch {
	case ex.Chosen != "":
		for _, r := range ex.NodePools {
			if r.NodePool == ex.Chosen {
				fmt.Fprintf(o.Out, "Would launch from NodePool %s (karpx's scheduling, highest weight first): %s in %s (%s, $%.4f/h%s)\n", r.NodePool, r.InstanceType, orUnknown(r.Zone), r.CapacityType, r.PriceUSDPerHour, overlayNote(r))
			}
		}
	case len(ex.NotModelled) > 0:
		fmt.Fprintf(o.Out, "karpx cannot model NodePool %s (node class not a karpenter.k8s.aws EC2NodeClass): whether it launches a node for this pod is the autoscaler's decision, in its events below.\n",
			strings.Join(ex.NotModelled, ", "))
	default:
		fmt.Fprintf(o.Out, "No NodePool can launch a node for this pod.\n")
	}
	printReservations(o.Out, ex.Reservations)
	if len(ex.NodeOverlays) > 0 {
		fmt.Fprintf(o.Out, "\nNodeOverlays (weight descending, then name descending; the first that selects an offering sets its price):\n")
		w := printers.GetNewTabWriter(o.Out)
		fmt.Fprintln(w, "  NAME\tWEIGHT\tAPPLIED\tCONDITION\tREASON")
		for _, r := range ex.NodeOverlays {
			fmt.Fprintf(w, "  %s\t%d\t%v\t%s\t%s\n", r.Name, r.Weight, r.Applied, table.Dash(r.Condition), table.Dash(table.OneLine(strings.TrimSpace(r.Reason+" "+r.Message))))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(ex.AutoscalerEvents) > 0 {
		fmt.Fprintf(o.Out, "\nThe autoscaler's latest events for this pod (newest first):\n")
		w := printers.GetNewTabWriter(o.Out)
		fmt.Fprintln(w, "  LAST SEEN\tSOURCE\tTYPE\tREASON\tCOUNT\tMESSAGE")
		for _, e := range ex.AutoscalerEvents {
			seen := "-"
			if !e.LastSeen.IsZero() {
				seen = e.LastSeen.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%d\t%s\n", seen, e.Source, e.Type, e.Reason, e.Count, table.OneLine(e.Message))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	} else if len(ex.NotModelled) > 0 {
		fmt.Fprintf(o.Out, "\nNo event from %s about this pod yet.\n", strings.Join(AutoscalerSources, " or "))
	}
	for _, n := range ex.Notes {
		fmt.Fprintf(o.Out, "Note: %s.\n", n)
	}
	return nil
}

func orUnknown(zone string) string {
	if zone == "" {
		return "an unknown zone"
	}
	return zone
}

// Table returns the NodePools as a table: NODEPOOL, WEIGHT, LAUNCH (yes,
// no, or unknown for a node class karpx cannot model), INSTANCE-TYPE, ZONE, CAPACITY-TYPE, PRICE ($/h), REASON; -o wide
// adds NODECLASS and TYPES (how many instance types the launch would offer).
func (ex *Explanation) Table() *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "NodePool", Type: "string"},
		{Name: "Weight", Type: "integer"},
		{Name: "Launch", Type: "string"},
		{Name: "Instance-Type", Type: "string"},
		{Name: "Zone", Type: "string"},
		{Name: "Capacity-Type", Type: "string"},
		{Name: "Price", Type: "string", Description: "USD per hour of the cheapest offering"},
		{Name: "NodeClass", Type: "string", Priority: 1},
		{Name: "Types", Type: "integer", Priority: 1},
		{Name: "Reason", Type: "string"},
	}}
	dash := table.Dash
	for _, r := range ex.NodePools {
		launch, price := "no", "-"
		if r.NotModelled {
			launch = "unknown"
		}
		if r.CanLaunch {
			launch, price = "yes", fmt.Sprintf("$%.4f", r.PriceUSDPerHour)
			if r.PriceOverlay != "" {
				price += " (NodeOverlay " + r.PriceOverlay + ")"
			}
			if r.NodePool == ex.Chosen {
				launch = "yes (chosen)"
			}
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			r.NodePool, int64(r.Weight), launch, dash(r.InstanceType), dash(r.Zone), dash(r.CapacityType), price,
			dash(r.NodeClass), int64(len(r.InstanceTypes)), dash(table.OneLine(r.Reason)),
		}})
	}
	return t
}

// Object returns ex as an unstructured PodExplanation for the JSON and
// YAML printers.
func (ex *Explanation) Object() (runtime.Object, error) {
	return output.Object(ExplanationKind, ex)
}

// overlayNote describes the NodeOverlays that changed r's launch: the one
// that set the price (with the catalogue price it replaced) and those
// that added capacity; "" when none did.
func overlayNote(r NodePoolResult) string {
	var parts []string
	if r.PriceOverlay != "" {
		parts = append(parts, fmt.Sprintf("price set by NodeOverlay %s; catalogue $%.4f/h", r.PriceOverlay, r.CatalogPriceUSDPerHour))
	}
	for _, res := range slices.Sorted(maps.Keys(r.CapacityOverlays)) {
		parts = append(parts, fmt.Sprintf("%s added by NodeOverlay %s", res, r.CapacityOverlays[res]))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}
