package capacity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/karpx/karpx/autoscaler/aws/capacity"
	"github.com/karpx/karpx/plugin/cluster"
	"github.com/karpx/karpx/plugin/output"
	"github.com/karpx/karpx/plugin/status"
	"github.com/karpx/karpx/plugin/table"
	"github.com/karpx/karpx/plugin/throttle"
)

const capacityLong = `Show the karpx controller's learned capacity per (instance type, AMI).

karpx plans nodes with what each instance type offers to pods when booted
from the AMI it would get. The first value is an estimate: the catalogue's
allocatable adjusted for the EC2NodeClass's spec.kubelet (maxPods,
kubeReserved, systemReserved, evictionHard). When a Node of that instance
type and AMI registers, its real status.allocatable replaces the estimate.
The table lists, per key, the estimated and observed cpu, memory and pods
and the observation's age; --all adds keys with an estimate only, -o wide
the ephemeral storage. -o json and -o yaml print a karpx.io/v1alpha1
CapacityReport.

On a cluster without a karpx controller (upstream Karpenter keeps no
learned-capacity cache) it says so and lists each NodeClaim's allocatable,
what the autoscaler planned with, against its Node's status.allocatable
(-o json|yaml: a NodeClaimCapacityReport).`

const capacityExample = `  # Observed capacity of the controller installed from manifests/controller
  kubectl karpx capacity

  # Every key, including those only estimated, as JSON
  kubectl karpx capacity --all -o json

  # A controller running locally with --status-bind-address :8082
  kubectl karpx capacity --endpoint http://127.0.0.1:8082`

// ReportKind is the kind -o json and -o yaml print the capacity report as,
// with apiVersion output.APIVersion (karpx.io/v1alpha1).
const ReportKind = "CapacityReport"

// Options are the inputs of `kubectl karpx capacity`.
type Options struct {
	genericiooptions.IOStreams
	// Conn locates the controller (--service, --port, --endpoint, -n), as
	// for kubectl karpx throttle.
	Conn *throttle.Options
	// Print holds -o ("" and "wide" print the table, wide with the
	// ephemeral-storage column; json and yaml a karpx.io/v1alpha1
	// CapacityReport) and --no-headers.
	Print *output.Flags
	// All includes keys that have an estimate only (--all).
	All bool
	// Now returns the current time for ages; nil means time.Now.
	Now func() time.Time
	// Factory reads NodeClaims and Nodes when the cluster has no karpx
	// controller Service (upstream Karpenter).
	Factory cluster.Factory
}

// NewCmd returns the `capacity` command.
func NewCmd(f cluster.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{IOStreams: streams, Conn: throttle.NewOptions(f, streams), Print: output.NewFlags(false), Factory: f}
	cmd := &cobra.Command{
		Use:     "capacity [--all] [--endpoint URL] [-o wide|json|yaml]",
		Short:   "Show estimated and observed allocatable per instance type and AMI",
		Long:    capacityLong,
		Example: capacityExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Conn.Complete(cmd, args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.Print.AddFlags(cmd, true)
	cmd.Flags().BoolVar(&o.All, "all", false, "Include keys with an estimate only.")
	cmd.Flags().StringVar(&o.Conn.Service, "service", o.Conn.Service, "Name of the controller's Service.")
	cmd.Flags().StringVar(&o.Conn.Port, "port", o.Conn.Port, "Name or number of the Service port that serves /capacity (the controller's status port).")
	cmd.Flags().StringVar(&o.Conn.Endpoint, "endpoint", o.Conn.Endpoint, "Read from this controller URL (its --status-bind-address) instead of the API server's service proxy, e.g. http://127.0.0.1:8082.")
	return cmd
}

// Validate checks -o and the controller coordinates.
func (o *Options) Validate() error {
	if _, err := o.Print.ToPrinter(); err != nil {
		return err
	}
	return o.Conn.ValidateSource()
}

// Run reads the controller's report and prints it. Without a karpx
// controller Service (a cluster run by upstream Karpenter) it says so on
// stderr and prints each NodeClaim's allocatable against its Node's
// instead (NodeClaimReport).
func (o *Options) Run(ctx context.Context) error {
	var rep capacity.Report
	if err := status.FetchJSON(ctx, o.Conn, capacity.HandlerPath, &rep); err != nil {
		var missing *throttle.ServiceNotFoundError
		if errors.As(err, &missing) && o.Factory != nil {
			return o.runWithoutController(ctx, o.ErrOut)
		}
		return fmt.Errorf("reading the capacity cache: %w", err)
	}
	if !o.All {
		rep.Entries = slices.DeleteFunc(rep.Entries, func(e capacity.Entry) bool { return e.Observed == nil })
	}
	if printed, err := o.Print.PrintObject(o.Out, ReportKind, &rep); printed || err != nil {
		return err
	}
	if len(rep.Entries) == 0 {
		fmt.Fprintln(o.ErrOut, "No observed capacity yet (no Node launched by karpx has registered); --all lists the estimates.")
		return nil
	}
	if !rep.Learning {
		fmt.Fprintln(o.ErrOut, "Capacity learning is off (a controller older than this plugin, started with --capacity-learning=false): planning uses the estimates.")
	}
	now := nowFn()
	if o.Now != nil {
		now = o.Now()
	}
	return o.Print.Tables().Print(o.Out, entryTable(rep.Entries, now))
}

// nowFn is the clock of ages when Options.Now is nil (tests replace it).
var nowFn = time.Now

// entryColumns are the columns of the controller's report: one row per
// (instance type, AMI).
var entryColumns = slices.Concat([]metav1.TableColumnDefinition{
	{Name: "Instance-Type", Type: "string"},
	{Name: "AMI", Type: "string"},
}, allocatableColumns("Estimated → observed"), []metav1.TableColumnDefinition{
	{Name: "Observed", Type: "string", Description: "Age of the observation."},
	{Name: "Node", Type: "string", Description: "The Node observed."},
})

func entryTable(entries []capacity.Entry, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: entryColumns}
	for _, e := range entries {
		var obs corev1.ResourceList
		age, node := table.None, table.None
		if e.Observed != nil {
			obs = e.Observed.Allocatable
			age, node = duration.HumanDuration(now.Sub(e.Observed.At)), e.Observed.Node
		}
		cells := append([]any{e.InstanceType, e.AMIID}, allocatableCells(e.Estimate, obs)...)
		t.Rows = append(t.Rows, metav1.TableRow{Cells: append(cells, age, node), Object: runtime.RawExtension{}})
	}
	return t
}

// allocatable are the resources of the allocatable columns, in their
// order; the last is shown only with -o wide.
var allocatable = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage}

// allocatableColumns are the CPU, Memory, Pods and (-o wide)
// Ephemeral-Storage columns, each "from → to" allocatable as described by
// fromTo (e.g. "Estimated → observed").
func allocatableColumns(fromTo string) []metav1.TableColumnDefinition {
	out := make([]metav1.TableColumnDefinition, len(allocatable))
	for i, name := range allocatable {
		header := strings.ToUpper(string(name[:1])) + string(name[1:])
		if name == corev1.ResourceEphemeralStorage {
			header = "Ephemeral-Storage"
		}
		out[i] = metav1.TableColumnDefinition{Name: header, Type: "string", Description: fromTo + " allocatable " + string(name) + "."}
	}
	out[len(out)-1].Priority = 1
	return out
}

// allocatableCells are the cells of the allocatable columns for est and
// obs (nil before an observation).
func allocatableCells(est, obs corev1.ResourceList) []any {
	out := make([]any, len(allocatable))
	for i, name := range allocatable {
		out[i] = pair(est, obs, name)
	}
	return out
}

// pair renders "estimate → observed" for one resource ("-" where unknown;
// just the estimate before an observation).
func pair(est, obs corev1.ResourceList, name corev1.ResourceName) string {
	q := func(l corev1.ResourceList) string {
		if v, ok := l[name]; ok {
			return v.String()
		}
		return "-"
	}
	if obs == nil {
		return q(est)
	}
	return strings.Join([]string{q(est), q(obs)}, "→")
}
