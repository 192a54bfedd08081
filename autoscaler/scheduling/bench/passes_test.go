package bench

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// headToHeadTypes are HeadToHeadInstanceTypes from the EC2 catalogue,
// on-demand only, as the head-to-head's NodePool requires.
func headToHeadTypes() []*cloudprovider.InstanceType {
	var out []*cloudprovider.InstanceType
	for _, it := range CatalogInstanceTypes() {
		if !slices.Contains(HeadToHeadInstanceTypes, it.Name) {
			continue
		}
		it.Offerings = slices.DeleteFunc(it.Offerings, func(o cloudprovider.Offering) bool { return o.CapacityType != karpv1.CapacityTypeOnDemand })
		out = append(out, it)
	}
	return out
}

// BenchmarkSchedulingInPasses solves the 2,000 pods of the head-to-head's
// burst (the mix in creation order: generic, zone spread, hostname spread,
// zone affinity, then the 400 mutually anti-affine app=nginx pods) in
// passes of a fixed number of pods, as the provisioner sees a burst that
// arrives over several batch windows: each pass places its pods on the
// NodeClaims the passes before it planned (in flight, seen as
// clusterstate.Snapshot.ExistingNodes sees a NodeClaim not yet registered,
// with its planned pods reserved on it by Snapshot.Reserve, as the
// provisioner reserves a nominated pod's room) or on new ones. It reports the
// NodeClaims planned in all (nodes) and their $/h. One pass of 2,000 needs
// 400 nodes (one per nginx pod, the others packed beside them); the
// smaller the passes, the more of the first 1,600 pods' nodes are full
// when the nginx pods come, and each of those gets a node of its own.
func BenchmarkSchedulingInPasses(b *testing.B) {
	types := headToHeadTypes()
	pods := DiversePods(2000, 1)
	for _, size := range []int{2000, 1600, 800, 400, 200, 100} {
		b.Run(fmt.Sprintf("pass=%d", size), func(b *testing.B) {
			var nodes int
			var price float64
			for range b.N {
				nodes, price = solveInPasses(b, pods, types, size)
			}
			b.ReportMetric(float64(nodes), "nodes")
			b.ReportMetric(price, "$/h")
		})
	}
}

// solveInPasses solves pods in passes of size pods each, in order, and
// returns the NodeClaims planned and their total $/h.
func solveInPasses(b *testing.B, pods []*corev1.Pod, types []*cloudprovider.InstanceType, size int) (int, float64) {
	np := NodePool()
	np.InstanceTypes = types
	typesByPool := map[string][]*cloudprovider.InstanceType{np.NodePool.Name: types}
	snap := &clusterstate.Snapshot{NodeClaims: map[string]*karpv1.NodeClaim{}}
	planned := map[string][]*corev1.Pod{} // NodeClaim name → pods planned on it
	nodes, price := 0, 0.0
	for i := 0; i < len(pods); i += size {
		existing := snap.ExistingNodes(typesByPool, nil)
		for _, nc := range snap.NodeClaims {
			for _, p := range planned[nc.Name] {
				snap.Reserve(existing, nc, p)
			}
		}
		res := scheduling.Solve(scheduling.Input{Pods: pods[i:min(i+size, len(pods))], NodePools: []scheduling.NodePoolInput{np}, ExistingNodes: existing})
		if len(res.Unschedulable) != 0 {
			b.Fatalf("pass of %d pods at %d: %d pods unschedulable", size, i, len(res.Unschedulable))
		}
		for name, ps := range res.ExistingPlacements {
			nc := strings.TrimPrefix(name, "nodeclaim/")
			planned[nc] = append(planned[nc], ps...)
		}
		for _, plan := range res.NewNodeClaims {
			nc := plan.NodeClaim()
			nc.Name = fmt.Sprintf("pass-%d", nodes)
			snap.NodeClaims[nc.Name] = nc
			planned[nc.Name] = slices.Clone(plan.Pods)
			nodes++
			price += plan.PriceUSDPerHour
		}
	}
	return nodes, price
}
