package scheduling_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpx/karpx/autoscaler/scheduling"
)

// benchPods returns n pods in 10 shapes (250m/256Mi to 4/8Gi), a tenth
// pinned to arm64 and a tenth to one zone, as a mix of Deployments would be.
func benchPods(n int) []*corev1.Pod {
	cpus := []string{"250m", "500m", "1", "2", "4"}
	mems := []string{"256Mi", "1Gi", "2Gi", "4Gi", "8Gi"}
	out := make([]*corev1.Pod, n)
	for i := range out {
		var opts []podOption
		switch i % 10 {
		case 3:
			opts = append(opts, nodeSelector(corev1.LabelArchStable, "arm64"))
		case 7:
			opts = append(opts, nodeSelector(corev1.LabelTopologyZone, zones[i%3]))
		}
		out[i] = pod(fmt.Sprintf("p-%04d", i), cpus[i%5], mems[(i/5)%5], opts...)
	}
	return out
}

// BenchmarkSolve places 1,000 pods with all 1,363 catalogue types on a
// NodePool that allows every type, on-demand and spot, in three zones.
func BenchmarkSolve(b *testing.B) {
	in := scheduling.Input{
		Pods:      benchPods(1000),
		NodePools: []scheduling.NodePoolInput{{NodePool: nodePool("default"), InstanceTypes: allTypes()}},
	}
	var res scheduling.Result
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res = scheduling.Solve(in)
	}
	b.StopTimer()
	if len(res.Unschedulable) != 0 {
		b.Fatalf("unschedulable: %v", res.Unschedulable)
	}
	b.ReportMetric(float64(len(in.Pods))*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
	b.ReportMetric(float64(len(res.NewNodeClaims)), "nodeclaims")
}

// BenchmarkSolveTopologyKeys places 500 pods of 10 Deployments, each
// spread (DoNotSchedule, maxSkew 1) over one topology key, with all
// catalogue types: zone (the bitmask path), instance-family (an instance
// type label) and a custom NodePool requirement key.
func BenchmarkSolveTopologyKeys(b *testing.B) {
	np := nodePool("default", req("example.com/rack", corev1.NodeSelectorOpIn, "r1", "r2", "r3", "r4"))
	for _, key := range []string{corev1.LabelTopologyZone, "karpenter.k8s.aws/instance-family", "example.com/rack"} {
		b.Run(key, func(b *testing.B) {
			var ps []*corev1.Pod
			for d := range 10 {
				app := fmt.Sprintf("app-%d", d)
				ps = append(ps, pods(50, app, "500m", "1Gi", withLabels("app", app), spread(key, 1, corev1.DoNotSchedule, sel("app", app)))...)
			}
			in := scheduling.Input{Pods: ps, NodePools: []scheduling.NodePoolInput{{NodePool: np, InstanceTypes: allTypes()}}}
			var res scheduling.Result
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res = scheduling.Solve(in)
			}
			b.StopTimer()
			if len(res.Unschedulable) != 0 {
				b.Fatalf("unschedulable: %d pods, e.g. %v", len(res.Unschedulable), res.Unschedulable)
			}
			b.ReportMetric(float64(len(in.Pods))*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
			b.ReportMetric(float64(len(res.NewNodeClaims)), "nodeclaims")
		})
	}
}
