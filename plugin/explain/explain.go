package explain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	karpxv1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation/reservationreport"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
	"github.com/karpx/karpx/plugin/cluster"
	"github.com/karpx/karpx/plugin/runner"
	"github.com/karpx/karpx/plugin/status"
	"github.com/karpx/karpx/plugin/throttle"
)

// formatWide is the -o value that adds the priority-1 columns.
const formatWide = "wide"

// NamespaceFunc returns the namespace kubectl's flags and kubeconfig select
// (-n, else the context's namespace, else "default"), as
// clientcmd.ClientConfig.Namespace does.
type NamespaceFunc func() (string, bool, error)

const explainLong = `Explain why a pod is pending and what Karpenter's NodePools would launch
for it, using karpx's own scheduling code without launching anything.

For each NodePool the table says whether it could launch a node for the pod
and, if not, which requirement, taint, limit or missing EC2NodeClass rules
it out; otherwise the cheapest instance type and offering (zone, capacity
type, hourly price) it would use. The NodePool Karpenter would pick (by
weight, then name) is marked.

The plugin has no EC2 access: instance types and on-demand prices come from
karpx's built-in catalogue, zones from each EC2NodeClass's status.subnets
(else the cluster's nodes), every offering is assumed available, and spot is
priced at the on-demand price (an upper bound). The output says so.

Capacity reservations: an EC2NodeClass's status.capacityReservations
become reserved offerings (preferred, as in the autoscaler), with their
free places read from the karpx controller (its status port, through the
API server's service proxy or --controller-endpoint) less the NodeClaims
not launched yet that hold one. A pod that only a full reservation can take
is told which reservation, its free and total places, and the fixes.

NodePools whose node class karpx cannot model (anything but a
karpenter.k8s.aws EC2NodeClass, such as upstream Karpenter's kwok provider's
KWOKNodeClass) are listed with LAUNCH "unknown", and the explanation shows
the autoscaler's own latest events for the pod instead: Karpenter's and
karpx's nominations ("Pod should schedule on: nodeclaim/...") and
scheduling failures.

Exit status: 0 when some NodePool can launch a node for the pod (or the pod
is not pending, or a NodePool's node class is one karpx cannot model), 3
when none can, 1 on other errors.`

const explainExample = `  # Why is pod web-7d4b9 in namespace shop pending?
  kubectl karpx explain pod web-7d4b9 -n shop

  # The same as YAML, with the instance types each NodePool would consider
  kubectl karpx explain pod web-7d4b9 -n shop -o yaml`

// Options are the inputs of `kubectl karpx explain pod`. Complete,
// Validate and Run are called in that order.
type Options struct {
	genericiooptions.IOStreams

	// Factory builds the client that reads the pod and Karpenter's objects.
	Factory cluster.Factory
	// Namespace resolves the pod's namespace from kubectl's flags; nil
	// means "default" unless -n is given.
	Namespace NamespaceFunc
	// PrintFlags hold -o: "" or "wide" print the table, json and yaml the
	// Explanation, name the pod's name.
	PrintFlags *genericclioptions.PrintFlags
	// NoHeaders omits the table's header row.
	NoHeaders bool

	// PodName and PodNamespace identify the pod (arguments and -n).
	PodName, PodNamespace string
	// Controller reads the karpx controller's capacity reservation counts
	// (reservationreport.HandlerPath) through the API server's service
	// proxy to Service throttle.DefaultService in throttle.DefaultNamespace,
	// or from --controller-endpoint; nil reads none.
	Controller *throttle.Options

	client  client.Reader
	printer printers.ResourcePrinter
	wide    bool
}

// NewOptions returns Options reading through f and writing to streams.
func NewOptions(f cluster.Factory, ns NamespaceFunc, streams genericiooptions.IOStreams) *Options {
	return &Options{IOStreams: streams, Factory: f, Namespace: ns, PrintFlags: genericclioptions.NewPrintFlags(""), Controller: throttle.NewOptions(f, streams)}
}

// NewCmd returns the `explain` command.
func NewCmd(f cluster.Factory, ns NamespaceFunc, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(f, ns, streams)
	cmd := &cobra.Command{
		Use:     "explain pod NAME [-n NAMESPACE] [-o wide|json|yaml|name]",
		Short:   "Explain why a pod is pending and what each NodePool would launch for it",
		Long:    explainLong,
		Example: explainExample,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 || (args[0] != "pod" && args[0] != "pods" && args[0] != "po") {
				return UsageError{fmt.Errorf("want `explain pod NAME`, got %q", strings.Join(args, " "))}
			}
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return []string{"pod"}, cobra.ShellCompDirectiveNoFileComp
			}
			if len(args) == 1 {
				return o.pendingPodNames(cmd), cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: runner.RunE(o),
	}
	o.PrintFlags.JSONYamlPrintFlags.AddFlags(cmd)
	cmd.Flags().StringVarP(o.PrintFlags.OutputFormat, "output", "o", *o.PrintFlags.OutputFormat, "Output format. One of: (json, yaml, name, wide).")
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", o.NoHeaders, "When using the default or wide output format, don't print headers.")
	cmd.Flags().StringVar(&o.Controller.Endpoint, "controller-endpoint", o.Controller.Endpoint,
		"Read the capacity reservations' free places from this karpx controller status URL instead of the API server's service proxy.")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml", "name", formatWide}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// UsageError is a mistake on the command line (wrong arguments); the root
// command exits with status 2 for it.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// UnschedulableError is returned by Run when no NodePool can launch a node
// for the pod; the root command exits with status 3 for it. The explanation
// has been printed already.
type UnschedulableError struct{ Pod string }

func (e *UnschedulableError) Error() string {
	return fmt.Sprintf("no NodePool can launch a node for pod %s", e.Pod)
}

// Complete resolves the namespace, builds the client and the printer.
func (o *Options) Complete(cmd *cobra.Command, args []string) error {
	o.PodName = args[1]
	if f := cmd.Flag("namespace"); f != nil && f.Changed {
		o.PodNamespace = f.Value.String()
	} else if o.Namespace != nil {
		ns, _, err := o.Namespace()
		if err != nil {
			return err
		}
		o.PodNamespace = ns
	}
	if o.PodNamespace == "" {
		o.PodNamespace = corev1.NamespaceDefault
	}
	c, err := o.Factory.Client()
	if err != nil {
		return err
	}
	o.client = c
	format := *o.PrintFlags.OutputFormat
	o.wide = format == formatWide
	if format == "" || o.wide {
		return nil
	}
	p, err := o.PrintFlags.ToPrinter()
	if err != nil {
		return UsageError{fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: json,name,wide,yaml", format)}
	}
	o.printer = p
	return nil
}

// Validate checks the pod's name and namespace.
func (o *Options) Validate() error {
	if errs := validation.IsDNS1123Subdomain(o.PodName); len(errs) > 0 {
		return UsageError{fmt.Errorf("invalid pod name %q: %s", o.PodName, strings.Join(errs, "; "))}
	}
	if errs := validation.IsDNS1123Label(o.PodNamespace); len(errs) > 0 {
		return UsageError{fmt.Errorf("invalid namespace %q: %s", o.PodNamespace, strings.Join(errs, "; "))}
	}
	return nil
}

// Run reads the cluster, explains the pod and prints the explanation. It
// returns *UnschedulableError when no NodePool can take the pod and karpx
// could model every NodePool's node class (otherwise the autoscaler decides,
// and the explanation shows its events instead), the
// API server's error (NotFound for a missing pod; cluster.ListError's for
// missing CRDs) otherwise.
func (o *Options) Run(ctx context.Context) error {
	snap, err := o.read(ctx)
	if err != nil {
		return err
	}
	ex := Explain(snap)
	if err := o.print(ex); err != nil {
		return err
	}
	if ex.Pending && ex.Chosen == "" && len(ex.NotModelled) == 0 {
		return &UnschedulableError{Pod: o.PodNamespace + "/" + o.PodName}
	}
	return nil
}

// read gathers the Snapshot for the pod. EC2NodeClasses, NodeClaims, Nodes
// and DaemonSets that cannot be listed (CRD absent, RBAC) leave their part
// empty and add a note; the pod and NodePools are required.
func (o *Options) read(ctx context.Context) (*Snapshot, error) {
	snap := &Snapshot{}
	var pod corev1.Pod
	if err := o.client.Get(ctx, client.ObjectKey{Namespace: o.PodNamespace, Name: o.PodName}, &pod); err != nil {
		return nil, err
	}
	snap.Pod = &pod
	var pools karpv1.NodePoolList
	if err := o.client.List(ctx, &pools); err != nil {
		return nil, cluster.ListError(cluster.NodePoolsResource, err)
	}
	snap.NodePools = pools.Items

	optional := func(what string, list client.ObjectList) bool {
		err := o.client.List(ctx, list)
		if err == nil {
			return true
		}
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			snap.Notes = append(snap.Notes, what+" not served by this cluster: treated as none")
		} else {
			snap.Notes = append(snap.Notes, fmt.Sprintf("%s unavailable (%v): treated as none", what, err))
		}
		return false
	}
	var classes karpxv1.EC2NodeClassList
	if optional("EC2NodeClasses", &classes) {
		snap.EC2NodeClasses = classes.Items
	}
	var overlays v1alpha1.NodeOverlayList
	if optional("NodeOverlays", &overlays) {
		snap.NodeOverlays = overlays.Items
	}
	var claims karpv1.NodeClaimList
	if optional("NodeClaims", &claims) {
		snap.NodeClaims = claims.Items
	}
	var nodes corev1.NodeList
	if optional("Nodes", &nodes) {
		snap.Nodes = nodes.Items
	}
	var ds appsv1.DaemonSetList
	if optional("DaemonSets", &ds) {
		snap.DaemonSetPods = clusterstate.DaemonSetTemplatePods(ds.Items)
	}
	snap.Reservations = o.reservationCounts(ctx, snap.EC2NodeClasses)
	// The pod's own events only (the API server filters on
	// involvedObject.uid), for the autoscaler's nominations and failures.
	var events corev1.EventList
	if err := o.client.List(ctx, &events, client.InNamespace(pod.Namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.uid", string(pod.UID))}); err != nil {
		snap.Notes = append(snap.Notes, fmt.Sprintf("the pod's events unavailable (%v): the autoscaler's events are not shown", err))
	} else {
		snap.Events = events.Items
	}
	return snap, nil
}

// pendingPodNames lists the namespace's pending pods for completion.
func (o *Options) pendingPodNames(cmd *cobra.Command) []string {
	c, err := o.Factory.Client()
	if err != nil {
		return nil
	}
	ns := corev1.NamespaceDefault
	if f := cmd.Flag("namespace"); f != nil && f.Changed {
		ns = f.Value.String()
	} else if o.Namespace != nil {
		if n, _, err := o.Namespace(); err == nil && n != "" {
			ns = n
		}
	}
	var pods corev1.PodList
	if err := c.List(cmd.Context(), &pods, client.InNamespace(ns)); err != nil {
		return nil
	}
	var names []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" && p.Status.Phase == corev1.PodPending {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// controllerTimeout bounds the read of the controller's reservation
// counts, so that a slow controller cannot hold up the explanation.
const controllerTimeout = 5 * time.Second

// reservationCounts reads the controller's capacity reservation counts
// when some EC2NodeClass lists a reservation; nil when none does or the
// controller does not answer (the explanation then notes
// ReservationsNote).
func (o *Options) reservationCounts(ctx context.Context, classes []karpxv1.EC2NodeClass) *reservationreport.Report {
	if o.Controller == nil || !slices.ContainsFunc(classes, func(c karpxv1.EC2NodeClass) bool { return len(c.Status.CapacityReservations) > 0 }) {
		return nil
	}
	if o.Controller.Namespace == "" {
		o.Controller.Namespace = throttle.DefaultNamespace
	}
	if o.Controller.Endpoint != "" {
		if err := o.Controller.ValidateSource(); err != nil {
			fmt.Fprintf(o.ErrOut, "capacity reservation counts unavailable: %v\n", err)
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, controllerTimeout)
	defer cancel()
	rep := &reservationreport.Report{}
	if err := status.FetchJSON(ctx, o.Controller, reservationreport.HandlerPath, rep); err != nil {
		return nil
	}
	return rep
}
