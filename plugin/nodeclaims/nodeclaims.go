package nodeclaims

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/state/clusterstate"
	"github.com/karpx/karpx/plugin/cluster"
	"github.com/karpx/karpx/plugin/output"
	"github.com/karpx/karpx/plugin/status"
	"github.com/karpx/karpx/plugin/table"
)

// NoNodeClaimsMessage is written to stderr when the table would be empty.
const NoNodeClaimsMessage = "No NodeClaims found."

// nominatedReason and nominatedPrefix match the pod events the autoscaler
// (and Karpenter) records: reason Nominated, message
// "Pod should schedule on: nodeclaim/<name>".
const (
	nominatedReason = "Nominated"
	nominatedPrefix = "Pod should schedule on: nodeclaim/"
)

const long = `Show each NodeClaim's lifecycle: its phase (Pending, Launched, Registered,
Initialized, Terminating), the time it spent launching (creation to
Launched), registering (Launched to Registered) and initialising
(Registered to Initialized), counted up to now for the current phase; the
number of pods nominated to it (distinct pods with a "Nominated" event
naming it, still pending or bound to its Node); and, until it is
Initialized, what blocks it: a Node that is not Ready, startup and known
ephemeral taints still present, requested extended resources (such as
nvidia.com/gpu) not yet allocatable. -o wide adds the Node and instance
type. With -o json, yaml or name the NodeClaims are printed as a v1 List, as
kubectl get prints them.`

const example = `  # All NodeClaims with their phase times and blockers
  kubectl karpx nodeclaims

  # Only the GPU pool's, with their Nodes
  kubectl karpx nodeclaims --nodepool gpu -o wide`

// Options are the inputs of `kubectl karpx nodeclaims`.
type Options struct {
	genericiooptions.IOStreams
	// Factory builds the client.
	Factory cluster.Factory
	// Print holds -o ("" and "wide" print the table; json, yaml and name
	// a v1 List of NodeClaims, as kubectl get) and --no-headers.
	Print *output.Flags
	// NodePool restricts the output to NodeClaims labelled
	// karpenter.sh/nodepool with it (--nodepool).
	NodePool string
	// Selector is a label selector on NodeClaims (-l/--selector).
	Selector string
	// Now is the clock ages and phase times are measured with (time.Now
	// when nil).
	Now func() time.Time

	client   client.Reader
	printer  printers.ResourcePrinter
	selector labels.Selector
}

// NewCmd returns the `nodeclaims` command reading through f.
func NewCmd(f cluster.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return newCmd(&Options{IOStreams: streams, Factory: f, Print: output.NewFlags(true)})
}

// newCmd returns the command running o (tests set o.Now).
func newCmd(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "nodeclaims [--nodepool NAME] [-l SELECTOR] [-o wide|json|yaml|name]",
		Short:   "Show NodeClaims' phases, time per phase, nominated pods and what blocks initialisation",
		Long:    long,
		Example: example,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.Print.AddFlags(cmd, true)
	cmd.Flags().StringVar(&o.NodePool, "nodepool", "", "Show only the NodeClaims of this NodePool.")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "Label selector on NodeClaims (e.g. karpenter.sh/capacity-type=spot).")
	return cmd
}

// Complete validates the flags and builds the client and printer. It
// returns an error naming the flag for a bad --nodepool, -l or -o.
func (o *Options) Complete() error {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NodePool != "" {
		if errs := validation.IsDNS1123Subdomain(o.NodePool); len(errs) > 0 {
			return fmt.Errorf("invalid --nodepool %q: %s", o.NodePool, strings.Join(errs, "; "))
		}
	}
	sel, err := labels.Parse(o.Selector)
	if err != nil {
		return fmt.Errorf("invalid -l/--selector %q: %w", o.Selector, err)
	}
	if o.NodePool != "" {
		req, err := labels.NewRequirement(karpv1.NodePoolLabelKey, "=", []string{o.NodePool})
		if err != nil {
			return fmt.Errorf("invalid --nodepool %q: %w", o.NodePool, err)
		}
		sel = sel.Add(*req)
	}
	o.selector = sel
	p, err := o.Print.ToPrinter()
	if err != nil {
		return err
	}
	o.printer = p
	c, err := o.Factory.Client()
	if err != nil {
		return err
	}
	o.client = c
	return nil
}

// Run lists NodeClaims, their Nodes and the Nominated pod events and
// prints them. It returns the list errors as cluster.ListError describes
// them; events that cannot be listed (RBAC) leave the Nominated column "?"
// and a note on stderr.
func (o *Options) Run(ctx context.Context) error {
	var claims karpv1.NodeClaimList
	if err := o.client.List(ctx, &claims, client.MatchingLabelsSelector{Selector: o.selector}); err != nil {
		return cluster.ListError(cluster.NodeClaimsResource, err)
	}
	slices.SortFunc(claims.Items, func(a, b karpv1.NodeClaim) int { return strings.Compare(a.Name, b.Name) })
	if o.printer != nil {
		objs := make([]runtime.Object, len(claims.Items))
		gvks := make([]schema.GroupVersionKind, len(claims.Items))
		for i := range claims.Items {
			objs[i], gvks[i] = &claims.Items[i], cluster.KarpenterV1.WithKind("NodeClaim")
		}
		list, err := output.List(objs, gvks)
		if err != nil {
			return err
		}
		return o.printer.PrintObj(list, o.Out)
	}
	if len(claims.Items) == 0 {
		fmt.Fprintln(o.ErrOut, NoNodeClaimsMessage)
		return nil
	}
	var nodes corev1.NodeList
	if err := o.client.List(ctx, &nodes); err != nil {
		return cluster.ListError(schemaNodes, err)
	}
	byProviderID := map[string]*corev1.Node{}
	for i := range nodes.Items {
		byProviderID[nodes.Items[i].Spec.ProviderID] = &nodes.Items[i]
	}
	nominated, err := o.nominations(ctx)
	if err != nil {
		fmt.Fprintf(o.ErrOut, "Nominated pods unavailable: %v\n", err)
	}
	return o.Print.Tables().Print(o.Out, Table(claims.Items, byProviderID, nominated, o.Now()))
}

var schemaNodes = corev1.SchemeGroupVersion.WithResource("nodes")

// nominations counts, per NodeClaim name, the distinct pods with a
// Nominated event naming it that still exist and are not finished. It
// returns nil and the list error when events or pods cannot be read.
func (o *Options) nominations(ctx context.Context) (map[string]int, error) {
	var events corev1.EventList
	if err := o.client.List(ctx, &events, client.MatchingFields{"reason": nominatedReason}); err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := o.client.List(ctx, &pods); err != nil {
		return nil, err
	}
	live := map[types.UID]bool{}
	for _, p := range pods.Items {
		live[p.UID] = p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp.IsZero()
	}
	latest := map[types.UID]corev1.Event{} // the last nomination of each pod wins
	for _, ev := range events.Items {
		name, ok := strings.CutPrefix(ev.Message, nominatedPrefix)
		if ev.Reason != nominatedReason || !ok || name == "" || !live[ev.InvolvedObject.UID] {
			continue
		}
		if prev, seen := latest[ev.InvolvedObject.UID]; !seen || eventTime(ev).After(eventTime(prev)) {
			latest[ev.InvolvedObject.UID] = ev
		}
	}
	out := map[string]int{}
	for _, ev := range latest {
		name, _ := strings.CutPrefix(ev.Message, nominatedPrefix)
		out[name]++
	}
	return out, nil
}

func eventTime(ev corev1.Event) time.Time {
	if !ev.LastTimestamp.IsZero() {
		return ev.LastTimestamp.Time
	}
	if !ev.EventTime.IsZero() {
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}

var columns = []metav1.TableColumnDefinition{
	table.Named(table.NodeClaim, "Name"), table.NodePool,
	{Name: "Phase", Type: "string", Description: "Pending, Launched, Registered, Initialized or Terminating (kubectl karpx status's phase)."},
	{Name: "Launch", Type: "string", Description: "Creation to Launched (so far, while Pending)."},
	{Name: "Register", Type: "string", Description: "Launched to Registered (so far, while Launched)."},
	{Name: "Initialize", Type: "string", Description: "Registered to Initialized (so far, while Registered)."},
	{Name: "Nominated", Type: "string", Description: "Pods nominated to the NodeClaim (Nominated events), still pending or running."},
	{Name: "Blocked-By", Type: "string", Description: "What keeps the NodeClaim from Initialized; <none> once initialised."},
	table.Age, table.Wide(table.Node), table.Wide(table.InstanceType),
}

// Table returns the NodeClaims table at now. nodes maps providerID to
// Node; nominated maps NodeClaim name to pod count (nil: unknown, "?").
func Table(claims []karpv1.NodeClaim, nodes map[string]*corev1.Node, nominated map[string]int, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: columns}
	for i := range claims {
		nc := &claims[i]
		launch, register, initialize := phaseTimes(nc, now)
		nom := "?"
		if nominated != nil {
			nom = fmt.Sprint(nominated[nc.Name])
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{nc.Name, table.OrNone(nc.Labels[karpv1.NodePoolLabelKey]), status.Phase(nc), launch, register, initialize,
				nom, Blockers(nc, nodes[nc.Status.ProviderID]), human(now.Sub(nc.CreationTimestamp.Time)),
				table.OrNone(nc.Status.NodeName), table.OrNone(nc.Labels[corev1.LabelInstanceTypeStable])},
			Object: runtime.RawExtension{Object: nc},
		})
	}
	return t
}

// phaseTimes returns the time nc spent launching, registering and
// initialising ("-" for a phase not reached), each counted up to now for
// the phase it is in.
func phaseTimes(nc *karpv1.NodeClaim, now time.Time) (string, string, string) {
	start := nc.CreationTimestamp.Time
	out := [3]string{"-", "-", "-"}
	for i, typ := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
		c := nc.StatusConditions().Get(typ)
		if c == nil || !c.IsTrue() {
			if nc.DeletionTimestamp.IsZero() {
				out[i] = human(now.Sub(start))
			}
			break
		}
		out[i] = human(c.LastTransitionTime.Sub(start))
		start = c.LastTransitionTime.Time
	}
	return out[0], out[1], out[2]
}

// Blockers summarises what keeps nc from Initialized given its Node (nil
// when none has registered): "waiting for instance", "waiting for Node", or
// clusterstate.InitializationBlockers joined by "; ". "<none>" once
// initialised or terminating.
func Blockers(nc *karpv1.NodeClaim, node *corev1.Node) string {
	if !nc.DeletionTimestamp.IsZero() || nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
		return table.None
	}
	switch {
	case nc.Status.ProviderID == "":
		if c := nc.StatusConditions().Get(karpv1.ConditionTypeLaunched); c != nil && c.IsFalse() && c.Message != "" {
			return "launch: " + c.Message
		}
		return "waiting for instance"
	case node == nil:
		return "waiting for Node"
	}
	if b := clusterstate.InitializationBlockers(nc, node); len(b) > 0 {
		return strings.Join(b, "; ")
	}
	return "waiting for the autoscaler"
}

// human is d as kubectl prints ages, 0s when negative (clock skew).
func human(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return duration.HumanDuration(d)
}
