package status

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/plugin/table"
)

// conditionReady is the root condition type of Karpenter's objects (the
// operatorpkg convention): True when all the others are.
const conditionReady = "Ready"

// Well-known labels Karpenter sets on NodeClaims once the instance is chosen.
const (
	labelInstanceType = corev1.LabelInstanceTypeStable // node.kubernetes.io/instance-type
	labelZone         = corev1.LabelTopologyZone       // topology.kubernetes.io/zone
)

var nodePoolColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the NodePool."},
	{Name: "NodeClass", Type: "string", Description: "Name of the node class in spec.template.spec.nodeClassRef."},
	{Name: "Nodes", Type: "integer", Description: "Number of launched NodeClaims (Launched=True, not terminating) labelled karpenter.sh/nodepool with the NodePool's name."},
	{Name: "CPU", Type: "string", Description: "Sum of the NodeClaims' status.capacity cpu, in cores, over spec.limits.cpu (- when unlimited)."},
	{Name: "Memory", Type: "string", Description: "Sum of the NodeClaims' status.capacity memory over spec.limits.memory (- when unlimited)."},
	{Name: "Ready", Type: "string", Description: "False when Ready, NodeClassReady or NodeRegistrationHealthy is False; else the Ready condition's status."},
	{Name: "Weight", Type: "integer", Description: "spec.weight: higher weights are tried first."},
	{Name: "Reason", Type: "string", Priority: 1, Description: "Reason and message of the first False condition among NodeClassReady, NodeRegistrationHealthy and Ready."},
}

var nodeClaimColumns = []metav1.TableColumnDefinition{
	table.Named(table.NodeClaim, "Name"), table.NodePool, table.InstanceType, table.Zone,
	{Name: "Capacity", Type: "string", Description: "Value of the karpenter.sh/capacity-type label (on-demand, spot, reserved)."},
	{Name: "Phase", Type: "string", Description: "Lifecycle phase derived from the Launched, Registered and Initialized conditions; for a NodeClaim EC2 is about to take away, the interruption kind and the seconds left before the reclaim (karpx.io/interruption annotations)."},
	table.Node, table.Age,
	{Name: "Provider-ID", Type: "string", Priority: 1, Description: "status.providerID, the cloud instance."},
	table.Image,
}

// nodePoolTable returns the NodePools table. claims are all the listed
// NodeClaims; each pool's NODES, CPU and MEMORY add up those labelled with
// its name.
func nodePoolTable(pools []karpv1.NodePool, claims []karpv1.NodeClaim) *metav1.Table {
	type totals struct {
		nodes       int64
		cpu, memory resource.Quantity
	}
	byPool := map[string]*totals{}
	for i := range claims {
		name := claims[i].Labels[karpv1.NodePoolLabelKey]
		t := byPool[name]
		if t == nil {
			t = &totals{}
			byPool[name] = t
		}
		if nodeClaimCondition(&claims[i], karpv1.ConditionTypeLaunched) != metav1.ConditionTrue {
			// Not a node: never launched, or its launch failed.
			continue
		}
		t.nodes++
		if q, ok := claims[i].Status.Capacity[corev1.ResourceCPU]; ok {
			t.cpu.Add(q)
		}
		if q, ok := claims[i].Status.Capacity[corev1.ResourceMemory]; ok {
			t.memory.Add(q)
		}
	}

	t := &metav1.Table{ColumnDefinitions: nodePoolColumns}
	for i := range pools {
		np := &pools[i]
		sum := byPool[np.Name]
		if sum == nil {
			sum = &totals{}
		}
		nodeClass := table.None
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && ref.Name != "" {
			nodeClass = ref.Name
		}
		weight := any(table.None)
		if np.Spec.Weight != nil {
			weight = *np.Spec.Weight
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{
				np.Name,
				nodeClass,
				sum.nodes,
				usage(sum.cpu, np.Spec.Limits, corev1.ResourceCPU, formatCPU),
				usage(sum.memory, np.Spec.Limits, corev1.ResourceMemory, formatBytes),
				string(readiness(np)),
				weight,
				notReadyReason(np),
			},
			Object: runtime.RawExtension{Object: np},
		})
	}
	return t
}

// nodeClaimTable returns the NodeClaims table, with ages measured at now.
// The Provider-ID and Image columns have priority 1: the table printer
// shows them only with -o wide.
func nodeClaimTable(claims []karpv1.NodeClaim, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: nodeClaimColumns}
	for i := range claims {
		nc := &claims[i]
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{
				nc.Name,
				table.OrNone(nc.Labels[karpv1.NodePoolLabelKey]),
				table.OrNone(nc.Labels[labelInstanceType]),
				table.OrNone(nc.Labels[labelZone]),
				table.OrNone(nc.Labels[karpv1.CapacityTypeLabelKey]),
				Phase(nc) + interruptionNote(nc, now),
				table.OrNone(nc.Status.NodeName),
				table.Since(nc.CreationTimestamp.Time, now),
				table.OrNone(nc.Status.ProviderID),
				table.OrNone(nc.Status.ImageID),
			},
			Object: runtime.RawExtension{Object: nc},
		})
	}
	return t
}

// poolConditions are the NodePool conditions that make READY False, in the
// order their reasons are shown.
var poolConditions = []string{karpv1.ConditionTypeNodeClassReady, karpv1.ConditionTypeNodeRegistrationHealthy, conditionReady}

// readiness is the READY cell: False when any of poolConditions is False
// (a pool whose EC2NodeClass resolves nothing, or whose launches keep
// failing, is not ready whatever its Ready says), else the Ready status.
func readiness(np *karpv1.NodePool) metav1.ConditionStatus {
	for _, t := range poolConditions {
		if nodePoolCondition(np, t) == metav1.ConditionFalse {
			return metav1.ConditionFalse
		}
	}
	return nodePoolCondition(np, conditionReady)
}

// notReadyReason is the REASON cell: "Type: Reason: message" of the first
// False condition among poolConditions, or <none>.
func notReadyReason(np *karpv1.NodePool) string {
	for _, t := range poolConditions {
		for _, c := range np.Status.Conditions {
			if c.Type == t && c.Status == metav1.ConditionFalse {
				return c.Type + ": " + c.Reason + ": " + c.Message
			}
		}
	}
	return table.None
}
