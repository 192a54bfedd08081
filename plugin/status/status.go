package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/plugin/cluster"
	"github.com/karpx/karpx/plugin/output"
	"github.com/karpx/karpx/plugin/runner"
	"github.com/karpx/karpx/plugin/table"
	"github.com/karpx/karpx/plugin/throttle"
)

// Messages written to the error stream, as kubectl's "No resources found",
// when a table would be empty.
const (
	// BudgetUnavailableMessage replaces the EC2 API budget line when the
	// cluster has no karpx controller Service (e.g. it runs upstream
	// Karpenter): the tables come from the objects alone.
	BudgetUnavailableMessage = "EC2 API budget: unavailable (no karpx controller Service on this cluster, e.g. upstream Karpenter; the tables come from the objects alone)"
	NoNodePoolsMessage       = "No NodePools found."
	NoNodeClaimsMessage      = "No NodeClaims found."
)

// formatWide is the -o value that adds the priority-1 columns to the tables.
const formatWide = "wide"

const statusLong = `Show the cluster's Karpenter NodePools and NodeClaims.

The NodePools table shows, for each pool, its node class, the number of
NodeClaims labelled karpenter.sh/nodepool with its name, the CPU (cores)
and memory those NodeClaims provide against the pool's spec.limits ("-"
when unlimited), its readiness (False when its Ready, NodeClassReady or
NodeRegistrationHealthy condition is False; -o wide shows why) and its
weight. Only launched NodeClaims count as nodes.

The NodeClaims table shows each claim's pool, instance type, zone, capacity
type, phase (Pending, Launched, Registered, Initialized or Terminating, from
its status conditions; Unknown before Karpenter reports on it), node and
age. -o wide adds the provider ID and image.

NodeClaims stuck past a lifecycle limit (no instance after the launch TTL,
5m; no Node after the registration TTL, 15m; not Initialized 15m after
registration; a Node NotReady past the controller's threshold) are listed
under the tables with the reason.

NodeClaims whose Node reports a "...Ready" condition other than True
(kubelet's Ready, the EKS node monitoring agent's NetworkingReady,
StorageReady, KernelReady, ContainerRuntimeReady, AcceleratedHardwareReady:
what node repair acts on) are listed under "Unhealthy nodes" with the
condition, how long it has held and "being repaired" once node repair
deleted the NodeClaim (docs/node-repair.md).

Static NodePools (spec.replicas, docs/static-capacity.md) are listed under
"Static NodePools (spec.replicas)": desired (spec.replicas), current (its
NodeClaims not being deleted) and how many of them are Initialized,
deleting, limits.nodes when set, and "launching N" or "scaling in N"
while current differs from desired.

A third table lists the empty nodes (no pod but DaemonSet, mirror or
finished ones): how long each has been empty, its pool's consolidateAfter,
and OVERDUE when it has been empty for more than consolidateAfter + 2m,
with the reason disruption is blocked when one is known (do-not-disrupt,
consolidateAfter: Never, the disruption budget); static NodePools' nodes,
never consolidated, are not in it.

With -o json, yaml, name or a template, the NodePools and NodeClaims are
printed as one v1 List, NodePools first. When a table would be empty,
"No NodePools found." or "No NodeClaims found." is written to stderr.

Under the tables, read from the controller as kubectl karpx throttle does:
the EC2 API budget line and the cloud data sets the controller depends on
(instance types, offerings, spot prices, subnets, security groups, AMIs),
each with whether it is hydrated, its age, item count and last error.`

const statusExample = `  # Show all NodePools and NodeClaims
  kubectl karpx status

  # Only the pool "default" and its NodeClaims, with provider IDs and images
  kubectl karpx status --nodepool default -o wide

  # The same objects as a v1 List in YAML
  kubectl karpx status --nodepool default -o yaml`

// Options are the inputs of `kubectl karpx status`. NewOptions fills in the
// defaults; Complete, Validate and Run are called in that order.
type Options struct {
	genericiooptions.IOStreams

	// Factory builds the client that lists NodePools and NodeClaims.
	Factory cluster.Factory
	// PrintFlags hold -o and the template flags. An empty or "wide" output
	// format prints tables; any other format prints a v1 List.
	PrintFlags *genericclioptions.PrintFlags
	// NoHeaders omits the tables' header rows (--no-headers).
	NoHeaders bool
	// NodePool, when not empty, restricts the output to the NodePool of
	// that name and the NodeClaims labelled karpenter.sh/nodepool with it
	// (--nodepool).
	NodePool string
	// Now returns the current time, from which ages are measured. Complete
	// sets it to time.Now when it is nil.
	Now func() time.Time

	// Budget reads the controller's EC2 API budget for the line under the
	// tables (the same sources as `kubectl karpx throttle`; its
	// --budget-endpoint flag is --endpoint there). Nil skips the line.
	Budget *throttle.Options

	client  client.Reader
	printer printers.ResourcePrinter // nil for tables
	wide    bool
}

// NewOptions returns Options that write to streams and read through f.
func NewOptions(f cluster.Factory, streams genericiooptions.IOStreams) *Options {
	return &Options{
		IOStreams:  streams,
		Factory:    f,
		PrintFlags: genericclioptions.NewPrintFlags(""),
		Budget:     throttle.NewOptions(f, streams),
	}
}

// NewCmd returns the `status` command, reading through f and writing to
// streams.
func NewCmd(f cluster.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return newCmd(NewOptions(f, streams))
}

// newCmd returns the `status` command running o, which tests prepare with
// a fixed clock.
func newCmd(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "status [--nodepool NAME] [-o wide|json|yaml|name]",
		Short:   "Show NodePools and NodeClaims with capacity, limits and phases",
		Long:    statusLong,
		Example: statusExample,
		Args:    cobra.NoArgs,
		RunE:    runner.RunE(o),
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags binds the command's flags to o: -o/--output and cli-runtime's
// template and managed-fields flags, --no-headers and --nodepool, with
// shell completion for -o and --nodepool.
func (o *Options) AddFlags(cmd *cobra.Command) {
	o.PrintFlags.JSONYamlPrintFlags.AddFlags(cmd)
	o.PrintFlags.NamePrintFlags.AddFlags(cmd)
	o.PrintFlags.TemplatePrinterFlags.AddFlags(cmd)
	cmd.Flags().StringVarP(o.PrintFlags.OutputFormat, "output", "o", *o.PrintFlags.OutputFormat,
		fmt.Sprintf("Output format. One of: (%s).", strings.Join(o.allowedFormats(), ", ")))
	o.PrintFlags.OutputFlagSpecified = func() bool { return cmd.Flag("output").Changed }
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", o.NoHeaders, "When using the default or wide output format, don't print headers.")
	cmd.Flags().StringVar(&o.NodePool, "nodepool", o.NodePool, "Show only this NodePool and its NodeClaims.")
	if o.Budget != nil {
		cmd.Flags().StringVar(&o.Budget.Endpoint, "budget-endpoint", o.Budget.Endpoint,
			"Read the EC2 API budget line from this controller URL instead of the API server's service proxy (as kubectl karpx throttle --endpoint).")
	}

	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return o.allowedFormats(), cobra.ShellCompDirectiveNoFileComp
	})
	_ = cmd.RegisterFlagCompletionFunc("nodepool", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		return o.nodePoolNames(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
	})
}

// allowedFormats returns the -o values: cli-runtime's printers and "wide".
func (o *Options) allowedFormats() []string {
	return append(o.PrintFlags.AllowedFormats(), formatWide)
}

// nodePoolNames lists the NodePools' names for shell completion; errors
// yield no suggestions.
func (o *Options) nodePoolNames(ctx context.Context) []string {
	c, err := o.Factory.Client()
	if err != nil {
		return nil
	}
	var pools karpv1.NodePoolList
	if err := c.List(ctx, &pools); err != nil {
		return nil
	}
	names := make([]string, 0, len(pools.Items))
	for _, np := range pools.Items {
		names = append(names, np.Name)
	}
	return names
}

// Complete builds the client and the printer from the parsed flags and
// completes Budget (its namespace, from kubectl's -n/--namespace on cmd). It
// returns the Factory's error when the kubeconfig cannot be loaded, and an
// error listing the allowed formats when -o names none of them.
func (o *Options) Complete(cmd *cobra.Command, _ []string) error {
	if o.Now == nil {
		o.Now = time.Now
	}
	c, err := o.Factory.Client()
	if err != nil {
		return err
	}
	o.client = c
	if o.Budget != nil {
		if err := o.Budget.Complete(cmd, nil); err != nil {
			return err
		}
	}

	format := *o.PrintFlags.OutputFormat
	templateSet := o.PrintFlags.TemplatePrinterFlags != nil &&
		o.PrintFlags.TemplatePrinterFlags.TemplateArgument != nil &&
		*o.PrintFlags.TemplatePrinterFlags.TemplateArgument != ""
	o.wide = format == formatWide
	if o.wide || (format == "" && !templateSet) {
		o.printer = nil
		return nil
	}
	p, err := o.PrintFlags.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		allowed := o.allowedFormats()
		slices.Sort(allowed)
		return &output.UnsupportedError{Format: format, Allowed: allowed}
	}
	if err != nil {
		return err
	}
	o.printer = p
	return nil
}

// Validate checks the flags that Complete does not: --nodepool must be a
// valid NodePool name (a DNS-1123 subdomain) when set, and --budget-endpoint
// an http(s) URL, as throttle's --endpoint, when set. Without
// --budget-endpoint, the Service coordinates of Budget are not checked: a
// bad one only costs the budget line (see printBudget), not the tables.
func (o *Options) Validate() error {
	if o.NodePool != "" {
		if errs := validation.IsDNS1123Subdomain(o.NodePool); len(errs) > 0 {
			return fmt.Errorf("invalid --nodepool %q: %s", o.NodePool, strings.Join(errs, "; "))
		}
	}
	if o.Budget != nil && o.Budget.Endpoint != "" {
		if err := o.Budget.Validate(); err != nil {
			return fmt.Errorf("--budget-endpoint: %w", err)
		}
	}
	return nil
}

// Run lists the NodePools and NodeClaims and prints them. Listing errors
// are returned as cluster.ListError describes them: a *cluster.NotInstalledError
// when the CRDs are missing, the server's error (such as Forbidden)
// otherwise. With --nodepool, an error NotFound is returned when neither the
// NodePool nor any of its NodeClaims exists.
func (o *Options) Run(ctx context.Context) error {
	pools, claims, err := o.list(ctx)
	if err != nil {
		return err
	}
	if o.printer != nil {
		list, err := toList(pools, claims)
		if err != nil {
			return err
		}
		return o.printer.PrintObj(list, o.Out)
	}

	printed := false
	for _, t := range []struct {
		table *metav1.Table
		empty string
	}{
		{nodePoolTable(pools, claims), NoNodePoolsMessage},
		{nodeClaimTable(claims, o.Now()), NoNodeClaimsMessage},
	} {
		if len(t.table.Rows) == 0 {
			fmt.Fprintln(o.ErrOut, t.empty)
			continue
		}
		if printed {
			fmt.Fprintln(o.Out)
		}
		if err := o.tables().Print(o.Out, t.table); err != nil {
			return err
		}
		printed = true
	}
	printStuck(o.Out, claims, o.Now())
	printStatic(o.Out, pools, claims)
	if len(claims) > 0 {
		var nodes corev1.NodeList
		err := o.client.List(ctx, &nodes)
		if err != nil {
			err = fmt.Errorf("listing nodes: %w", err)
		} else {
			printUnhealthy(o.Out, claims, nodes.Items, o.Now())
		}
		var rows []emptyNode
		if err == nil {
			rows, err = o.readEmptyNodes(ctx, pools, claims, nodes.Items)
		}
		switch {
		case err != nil:
			fmt.Fprintf(o.ErrOut, "Empty nodes unavailable: %v\n", err)
		case len(rows) > 0:
			fmt.Fprintln(o.Out)
			if err := o.tables().Print(o.Out, emptyNodeTable(rows, o.Now())); err != nil {
				return err
			}
		}
	}
	if err := o.printReservations(ctx); err != nil {
		return err
	}
	o.fromController(ctx, o.printBudget)
	o.fromController(ctx, o.printDataSets)
	o.fromController(ctx, o.printInstanceStatus)
	return nil
}

// controllerTimeout bounds each read from the karpx controller under the
// tables, so that a slow controller cannot hold up the command.
const controllerTimeout = 5 * time.Second

// fromController calls show with ctx bounded by controllerTimeout when
// the command reaches a controller (o.Budget set), and does nothing
// otherwise.
func (o *Options) fromController(ctx context.Context, show func(context.Context)) {
	if o.Budget == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, controllerTimeout)
	defer cancel()
	show(ctx)
}

// printBudget adds one line on the controller's EC2 API budget under the
// tables. A missing controller Service (a cluster running upstream
// Karpenter) prints nothing; any other failure is one line on stderr and
// never fails the command.
func (o *Options) printBudget(ctx context.Context) {
	st, err := o.Budget.Fetch(ctx)
	var missing *throttle.ServiceNotFoundError
	switch {
	case errors.As(err, &missing):
		// Upstream Karpenter (or no controller): say which part is missing
		// rather than leaving it out silently.
		fmt.Fprintln(o.ErrOut, BudgetUnavailableMessage)
	case err != nil:
		fmt.Fprintf(o.ErrOut, "EC2 API budget unavailable: %v\n", err)
	default:
		fmt.Fprintf(o.Out, "\nEC2 API: %s (kubectl karpx throttle for details)\n", st.Summary())
	}
}

// tables is the printer of the tables (-o wide, --no-headers).
func (o *Options) tables() table.Printer { return table.Printer{Wide: o.wide, NoHeaders: o.NoHeaders} }

// list returns the NodePools and NodeClaims to show, each sorted by name.
func (o *Options) list(ctx context.Context) ([]karpv1.NodePool, []karpv1.NodeClaim, error) {
	var pools karpv1.NodePoolList
	if err := o.client.List(ctx, &pools); err != nil {
		return nil, nil, cluster.ListError(cluster.NodePoolsResource, err)
	}
	var opts []client.ListOption
	if o.NodePool != "" {
		opts = append(opts, client.MatchingLabels{karpv1.NodePoolLabelKey: o.NodePool})
		pools.Items = slices.DeleteFunc(pools.Items, func(np karpv1.NodePool) bool { return np.Name != o.NodePool })
	}
	var claims karpv1.NodeClaimList
	if err := o.client.List(ctx, &claims, opts...); err != nil {
		return nil, nil, cluster.ListError(cluster.NodeClaimsResource, err)
	}
	if o.NodePool != "" && len(pools.Items) == 0 && len(claims.Items) == 0 {
		return nil, nil, apierrors.NewNotFound(cluster.NodePoolsResource.GroupResource(), o.NodePool)
	}
	slices.SortFunc(pools.Items, func(a, b karpv1.NodePool) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(claims.Items, func(a, b karpv1.NodeClaim) int { return strings.Compare(a.Name, b.Name) })
	return pools.Items, claims.Items, nil
}

// toList returns pools then claims as a v1 List of unstructured objects
// with apiVersion and kind set, the shape kubectl prints for several kinds.
func toList(pools []karpv1.NodePool, claims []karpv1.NodeClaim) (*unstructured.UnstructuredList, error) {
	objs := make([]runtime.Object, 0, len(pools)+len(claims))
	gvks := make([]schema.GroupVersionKind, 0, cap(objs))
	for i := range pools {
		objs, gvks = append(objs, &pools[i]), append(gvks, cluster.KarpenterV1.WithKind("NodePool"))
	}
	for i := range claims {
		objs, gvks = append(objs, &claims[i]), append(gvks, cluster.KarpenterV1.WithKind("NodeClaim"))
	}
	return output.List(objs, gvks)
}
