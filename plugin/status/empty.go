package status

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	podset "github.com/karpx/karpx/autoscaler/state/pods"
	"github.com/karpx/karpx/plugin/table"
)

// OverdueGrace is how long past consolidateAfter an empty node may stay
// before the table flags it OVERDUE: two disruption passes, the drain and
// the instance termination fit well within it.
const OverdueGrace = 2 * time.Minute

var emptyNodeColumns = []metav1.TableColumnDefinition{
	table.NodePool, table.NodeClaim, table.Node,
	{Name: "Empty-For", Type: "string", Description: "Time since the last pod left the node (status.lastPodEventTime) or since initialisation."},
	{Name: "Consolidate-After", Type: "string", Description: "The NodePool's spec.disruption.consolidateAfter."},
	{Name: "Status", Type: "string", Description: "waiting (consolidateAfter not reached), due, or OVERDUE (more than consolidateAfter + 2m)."},
	{Name: "Blocked-By", Type: "string", Description: "Why disruption may not remove the node now, when a reason is known."},
}

// emptyNode is one row of the empty-nodes table.
type emptyNode struct {
	claim   *karpv1.NodeClaim
	pool    string
	since   time.Time
	after   *time.Duration // nil: consolidateAfter Never (or pool unknown)
	blocked string
}

// emptyNodes returns the Initialized NodeClaims whose Node runs no
// reschedulable pod, oldest first, with why each may be blocked; static
// NodePools' NodeClaims are left out (never consolidated). nodes and
// pods are all the cluster's; total and deleting count NodeClaims per
// NodePool for the budgets.
func emptyNodes(pools []karpv1.NodePool, claims []karpv1.NodeClaim, nodes []corev1.Node, pods []corev1.Pod, clk clock.Clock) []emptyNode {
	busy := map[string]bool{}
	for i := range pods {
		if pods[i].Spec.NodeName != "" && podset.Reschedulable(&pods[i]) {
			busy[pods[i].Spec.NodeName] = true
		}
	}
	nodeByName := map[string]*corev1.Node{}
	for i := range nodes {
		nodeByName[nodes[i].Name] = &nodes[i]
	}
	poolByName := map[string]*karpv1.NodePool{}
	for i := range pools {
		poolByName[pools[i].Name] = &pools[i]
	}
	total, deleting := map[string]int{}, map[string]int{}
	for i := range claims {
		p := claims[i].Labels[karpv1.NodePoolLabelKey]
		total[p]++
		if !claims[i].DeletionTimestamp.IsZero() {
			deleting[p]++
		}
	}
	var out []emptyNode
	for i := range claims {
		nc := &claims[i]
		init := nc.StatusConditions().Get(karpv1.ConditionTypeInitialized)
		node := nodeByName[nc.Status.NodeName]
		if !nc.DeletionTimestamp.IsZero() || init == nil || !init.IsTrue() || node == nil || busy[node.Name] {
			continue
		}
		// A static NodePool's nodes are never consolidated, empty or not:
		// the "Static NodePools" section shows them (printStatic).
		if np := poolByName[nc.Labels[karpv1.NodePoolLabelKey]]; np != nil && np.Spec.Replicas != nil {
			continue
		}
		row := emptyNode{claim: nc, pool: nc.Labels[karpv1.NodePoolLabelKey], since: init.LastTransitionTime.Time}
		if t := nc.Status.LastPodEventTime.Time; t.After(row.since) {
			row.since = t
		}
		np := poolByName[row.pool]
		switch {
		case np == nil:
			row.blocked = "NodePool not found"
		case nc.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true":
			row.blocked = "do-not-disrupt on the NodeClaim"
		case node.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true":
			row.blocked = "do-not-disrupt on the Node"
		case np.Spec.Disruption.ConsolidateAfter.Duration == nil:
			row.blocked = "consolidateAfter: Never"
		case np.MustGetAllowedDisruptions(clk, total[row.pool], karpv1.DisruptionReasonEmpty)-deleting[row.pool] <= 0:
			row.blocked = fmt.Sprintf("disruption budget (%d of %d nodes already leaving)", deleting[row.pool], total[row.pool])
		}
		if np != nil {
			row.after = np.Spec.Disruption.ConsolidateAfter.Duration
		}
		out = append(out, row)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].since.Before(out[j].since) })
	return out
}

// emptyNodeTable returns the empty-nodes table, with durations measured at now.
func emptyNodeTable(rows []emptyNode, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: emptyNodeColumns}
	for _, r := range rows {
		empty := now.Sub(r.since)
		after, status := "Never", "waiting"
		if r.after != nil {
			after = r.after.String()
			switch {
			case empty > *r.after+OverdueGrace:
				status = "OVERDUE"
			case empty >= *r.after:
				status = "due"
			}
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells:  []any{table.OrNone(r.pool), r.claim.Name, r.claim.Status.NodeName, table.Since(r.since, now), after, status, table.OrNone(r.blocked)},
			Object: runtime.RawExtension{Object: r.claim},
		})
	}
	return t
}

// readEmptyNodes lists pods and returns the empty-nodes rows of nodes (all
// the cluster's); an error (for example Forbidden on pods) leaves the
// table out.
func (o *Options) readEmptyNodes(ctx context.Context, pools []karpv1.NodePool, claims []karpv1.NodeClaim, nodes []corev1.Node) ([]emptyNode, error) {
	var pods corev1.PodList
	if err := o.client.List(ctx, &pods); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return emptyNodes(pools, claims, nodes, pods.Items, clock.RealClock{}), nil
}
