package clusterstate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/autoscaler/state/podcache"
	"github.com/karpx/karpx/requirements"
)

// Snapshot is the cluster as one pass sees it.
type Snapshot struct {
	// Nodes are all Nodes, by name.
	Nodes map[string]*corev1.Node
	// NodeClaims are all NodeClaims, by name.
	NodeClaims map[string]*karpv1.NodeClaim
	// NodeClaimOf maps a Node name to its NodeClaim (same providerID).
	NodeClaimOf map[string]*karpv1.NodeClaim
	// Pods maps a Node name to the pods bound to it that are not finished.
	Pods map[string][]*corev1.Pod
	// Unbound are the pods not bound to a Node yet and not finished.
	Unbound []*corev1.Pod
	// Grace, when set, is how ExistingNodes sees starting and briefly
	// NotReady nodes (see Grace).
	Grace *Grace
}

// Read lists Nodes, NodeClaims and bound pods from kube. It returns the
// first list error.
//
// The pods of the Snapshot are the informer cache's own objects, not
// copies (copying every pod of the cluster on every provisioning and
// disruption pass was half of the controller's heap at 20,000 pods; issue
// 12): callers must not modify them, and DeepCopy a pod before changing
// it (as consolidation's simulation does). Nodes and NodeClaims are
// copies, free to change.
func Read(ctx context.Context, kube client.Reader) (*Snapshot, error) {
	var nodes corev1.NodeList
	if err := kube.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	pods, err := podcache.List(ctx, kube)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Nodes: map[string]*corev1.Node{}, NodeClaims: map[string]*karpv1.NodeClaim{},
		NodeClaimOf: map[string]*karpv1.NodeClaim{}, Pods: map[string][]*corev1.Pod{}}
	byProviderID := map[string]*corev1.Node{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		s.Nodes[n.Name] = n
		if n.Spec.ProviderID != "" {
			byProviderID[n.Spec.ProviderID] = n
		}
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		s.NodeClaims[nc.Name] = nc
		if n := byProviderID[nc.Status.ProviderID]; n != nil && nc.Status.ProviderID != "" {
			s.NodeClaimOf[n.Name] = nc
		}
	}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.Spec.NodeName == "" {
			s.Unbound = append(s.Unbound, p)
			continue
		}
		s.Pods[p.Spec.NodeName] = append(s.Pods[p.Spec.NodeName], p)
	}
	return s, nil
}

// StillUnbound returns the pods of pods (read before s was) that s still
// holds unbound and unfinished, in their order. A provisioning pass reads
// its pending pods before the snapshot: a pod kube-scheduler bound in
// between is counted on its node in s, and planned again it would get a
// node of its own (a duplicate launch, problem P4); one deleted or
// finished in between needs none.
func (s *Snapshot) StillUnbound(pods []*corev1.Pod) []*corev1.Pod {
	unbound := make(map[types.UID]bool, len(s.Unbound))
	for _, p := range s.Unbound {
		unbound[p.UID] = true
	}
	out := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		if unbound[p.UID] {
			out = append(out, p)
		}
	}
	return out
}

// NodeOf returns the Node of nc, or nil when it has none (yet).
func (s *Snapshot) NodeOf(nc *karpv1.NodeClaim) *corev1.Node {
	if nc.Status.NodeName != "" {
		if n := s.Nodes[nc.Status.NodeName]; n != nil && n.Spec.ProviderID == nc.Status.ProviderID {
			return n
		}
	}
	for name, other := range s.NodeClaimOf {
		if other.Name == nc.Name {
			return s.Nodes[name]
		}
	}
	return nil
}

// ExistingNodes returns what a scheduling pass may place pods on: every
// Node that is not being deleted, not tainted karpenter.sh/disrupted and
// not excluded, and every NodeClaim not yet registered (launching or
// waiting for its Node) that is not being deleted or excluded. typesByPool
// gives the instance types of each NodePool, used for a NodeClaim launched
// but not yet reporting its allocatable (the smallest allocatable among its
// candidate types). exclude (may be nil) names the NodeClaims whose nodes a
// disruption command would remove. A Node's taints and allocatable are
// seen through s.Grace (see Grace): with it, starting and briefly NotReady
// nodes keep the pods planned onto them.
func (s *Snapshot) ExistingNodes(typesByPool map[string][]*cloudprovider.InstanceType, exclude func(*karpv1.NodeClaim) bool) []scheduling.ExistingNode {
	var out []scheduling.ExistingNode
	for name, n := range s.Nodes {
		nc := s.NodeClaimOf[name]
		if !n.DeletionTimestamp.IsZero() || hasTaint(n.Spec.Taints, karpv1.DisruptedTaintKey) {
			continue
		}
		if nc != nil && (!nc.DeletionTimestamp.IsZero() || (exclude != nil && exclude(nc))) {
			continue
		}
		taints, available := s.Grace.view(n, nc)
		for _, p := range s.Pods[name] {
			subtract(available, resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}))
			subtract(available, corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)})
		}
		// karpenter.sh/unregistered goes when karpx registers the Node
		// with its NodeClaim. A Node with no NodeClaim (an instance left
		// for garbage collection, say, after a controller was killed
		// mid-launch) keeps it: its room is not capacity.
		if nc != nil {
			taints = withoutTaint(taints, karpv1.UnregisteredTaintKey)
		}
		out = append(out, scheduling.ExistingNode{Name: name, Labels: n.Labels, Taints: taints,
			Available: available, Pods: s.Pods[name]})
	}
	for _, nc := range s.NodeClaims {
		if !nc.DeletionTimestamp.IsZero() || s.NodeOf(nc) != nil || (exclude != nil && exclude(nc)) {
			continue
		}
		allocatable := nc.Status.Allocatable
		if len(allocatable) == 0 {
			allocatable = smallestAllocatable(nc, typesByPool[nc.Labels[karpv1.NodePoolLabelKey]])
		}
		if len(allocatable) == 0 {
			continue
		}
		labels := requirements.SingleValueLabels(nc.Spec.Requirements)
		for k, v := range nc.Labels {
			labels[k] = v
		}
		en := scheduling.ExistingNode{Name: "nodeclaim/" + nc.Name, Labels: labels, Taints: nc.Spec.Taints, Available: allocatable.DeepCopy()}
		if ids := nc.Annotations[scheduling.ReservationsAnnotationKey]; ids != "" && nc.Status.ProviderID == "" {
			// Not launched yet: its planned reservation places are not
			// in the cloud provider's count.
			en.Reservations = strings.Split(ids, ",")
		}
		out = append(out, en)
	}
	return out
}

// Reserve subtracts pod's requests (and one pod slot) from the existing
// node that stands for nc in nodes (its Node when registered, else
// "nodeclaim/<name>", as ExistingNodes names them) and adds pod to that
// node's Pods, as scheduling.ExistingNode asks of a pod nominated to it,
// so that the pod counts for the affinity, anti-affinity and topology
// spread of the pods planned after it. Without it, a pod with a required
// hostname anti-affinity was planned onto an in-flight NodeClaim already
// holding a nominated pod of its group, and one of the two lost its place
// when the Node came up. It reports whether it found the node.
func (s *Snapshot) Reserve(nodes []scheduling.ExistingNode, nc *karpv1.NodeClaim, pod *corev1.Pod) bool {
	name := "nodeclaim/" + nc.Name
	if n := s.NodeOf(nc); n != nil {
		name = n.Name
	}
	for i := range nodes {
		if nodes[i].Name != name {
			continue
		}
		req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		req[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
		for k, q := range req {
			if cur, ok := nodes[i].Available[k]; ok {
				cur.Sub(q)
				nodes[i].Available[k] = cur
			}
		}
		// Clipped: Pods may share its array with the snapshot's.
		nodes[i].Pods = append(slices.Clip(nodes[i].Pods), pod)
		return true
	}
	return false
}

// smallestAllocatable is, per resource, the minimum allocatable across the
// NodeClaim's candidate instance types: whichever one EC2 launches offers at
// least that much.
func smallestAllocatable(nc *karpv1.NodeClaim, poolTypes []*cloudprovider.InstanceType) corev1.ResourceList {
	names, _ := requirements.Values(requirements.FromNodeClaim(nc.Spec.Requirements), corev1.LabelInstanceTypeStable)
	byName := map[string]*cloudprovider.InstanceType{}
	for _, it := range poolTypes {
		byName[it.Name] = it
	}
	var out corev1.ResourceList
	for _, n := range names {
		it, ok := byName[n]
		if !ok {
			continue
		}
		if out == nil {
			out = it.Allocatable.DeepCopy()
			continue
		}
		for k, q := range out {
			other, ok := it.Allocatable[k]
			if !ok {
				delete(out, k)
			} else if other.Cmp(q) < 0 {
				out[k] = other.DeepCopy()
			}
		}
	}
	return out
}

func subtract(from, what corev1.ResourceList) {
	for k, q := range what {
		if cur, ok := from[k]; ok {
			cur.Sub(q)
			from[k] = cur
		}
	}
}

func hasTaint(taints []corev1.Taint, key string) bool {
	for _, t := range taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func withoutTaint(taints []corev1.Taint, key string) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(taints))
	for _, t := range taints {
		if t.Key != key {
			out = append(out, t)
		}
	}
	return out
}
