package capacity

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/plugin/cluster"
	"github.com/karpx/karpx/plugin/table"
)

// NoControllerMessage is printed on stderr when the cluster has no karpx
// controller Service (e.g. it runs upstream Karpenter, which keeps no
// learned-capacity cache): the table then compares each NodeClaim's
// allocatable with its Node's, from the objects alone.
const NoControllerMessage = "Learned capacity: unavailable (no karpx controller Service on this cluster, e.g. upstream Karpenter, which keeps no learned-capacity cache); " +
	"showing each NodeClaim's allocatable (the autoscaler's expectation) against its Node's status.allocatable"

// NodeClaimReportKind is the kind -o json and -o yaml print the
// NodeClaim-based report as, with apiVersion output.APIVersion.
const NodeClaimReportKind = "NodeClaimCapacityReport"

// NodeClaimCapacity is one NodeClaim's expected and observed allocatable.
type NodeClaimCapacity struct {
	// NodeClaim is the NodeClaim's name.
	NodeClaim string `json:"nodeClaim"`
	// NodePool is its karpenter.sh/nodepool label.
	NodePool string `json:"nodePool,omitempty"`
	// InstanceType is its node.kubernetes.io/instance-type label.
	InstanceType string `json:"instanceType,omitempty"`
	// ImageID is status.imageID (empty for providers without images, such
	// as Karpenter's kwok provider).
	ImageID string `json:"imageID,omitempty"`
	// Expected is the NodeClaim's status.allocatable, what the autoscaler
	// planned with.
	Expected corev1.ResourceList `json:"expected,omitempty"`
	// Node is status.nodeName, empty until the Node registered.
	Node string `json:"node,omitempty"`
	// Observed is the Node's status.allocatable.
	Observed corev1.ResourceList `json:"observed,omitempty"`
	// Registered is when the Registered condition became True.
	Registered *metav1.Time `json:"registered,omitempty"`
}

// NodeClaimReport is what the command shows without a karpx controller.
type NodeClaimReport struct {
	// NodeClaims are sorted by name.
	NodeClaims []NodeClaimCapacity `json:"nodeClaims"`
}

// readNodeClaims builds the report from the NodeClaims and Nodes.
func readNodeClaims(ctx context.Context, c client.Reader) (*NodeClaimReport, error) {
	var claims karpv1.NodeClaimList
	if err := c.List(ctx, &claims); err != nil {
		return nil, cluster.ListError(cluster.NodeClaimsResource, err)
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	byName := map[string]*corev1.Node{}
	for i := range nodes.Items {
		byName[nodes.Items[i].Name] = &nodes.Items[i]
	}
	rep := &NodeClaimReport{NodeClaims: []NodeClaimCapacity{}}
	for _, nc := range claims.Items {
		r := NodeClaimCapacity{NodeClaim: nc.Name, NodePool: nc.Labels[karpv1.NodePoolLabelKey],
			InstanceType: nc.Labels[corev1.LabelInstanceTypeStable], ImageID: nc.Status.ImageID,
			Expected: nc.Status.Allocatable, Node: nc.Status.NodeName}
		if n, ok := byName[nc.Status.NodeName]; ok {
			r.Observed = n.Status.Allocatable
		}
		for _, cond := range nc.Status.Conditions {
			if cond.Type == karpv1.ConditionTypeRegistered && cond.Status == metav1.ConditionTrue {
				r.Registered = cond.LastTransitionTime.DeepCopy()
			}
		}
		rep.NodeClaims = append(rep.NodeClaims, r)
	}
	slices.SortFunc(rep.NodeClaims, func(a, b NodeClaimCapacity) int { return strings.Compare(a.NodeClaim, b.NodeClaim) })
	return rep, nil
}

// nodeClaimColumns are the columns of the report without a controller: one
// row per NodeClaim.
var nodeClaimColumns = slices.Concat([]metav1.TableColumnDefinition{table.NodeClaim, table.NodePool, table.InstanceType, table.Image},
	allocatableColumns("NodeClaim → Node"), []metav1.TableColumnDefinition{
		{Name: "Registered", Type: "string", Description: "Age of the Registered condition."},
		table.Node,
	})

func nodeClaimTable(rep *NodeClaimReport, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: nodeClaimColumns}
	for _, r := range rep.NodeClaims {
		age := table.None
		if r.Registered != nil {
			age = duration.HumanDuration(now.Sub(r.Registered.Time))
		}
		cells := append([]any{r.NodeClaim, table.OrNone(r.NodePool), table.OrNone(r.InstanceType), table.OrNone(r.ImageID)},
			allocatableCells(r.Expected, r.Observed)...)
		t.Rows = append(t.Rows, metav1.TableRow{Cells: append(cells, age, table.OrNone(r.Node)), Object: runtime.RawExtension{}})
	}
	return t
}

// runWithoutController prints the NodeClaim-based report after the
// NoControllerMessage note on errOut.
func (o *Options) runWithoutController(ctx context.Context, errOut io.Writer) error {
	c, err := o.Factory.Client()
	if err != nil {
		return err
	}
	rep, err := readNodeClaims(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintln(errOut, NoControllerMessage)
	if printed, err := o.Print.PrintObject(o.Out, NodeClaimReportKind, rep); printed || err != nil {
		return err
	}
	if len(rep.NodeClaims) == 0 {
		fmt.Fprintln(errOut, "No NodeClaims found.")
		return nil
	}
	now := nowFn()
	if o.Now != nil {
		now = o.Now()
	}
	return o.Print.Tables().Print(o.Out, nodeClaimTable(rep, now))
}
