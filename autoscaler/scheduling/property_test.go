package scheduling_test

import (
	"fmt"
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/scheduling"
)

// randomInput builds a random but valid cluster for seed: 0-4 existing
// nodes with running pods, and 30-120 pending pods with random requests,
// node selectors, zone and hostname spread, pod affinity and
// anti-affinity, host ports, volume zones and preferences.
func randomInput(seed int64) scheduling.Input {
	r := rand.New(rand.NewSource(seed))
	apps := []string{"web", "api", "db", "cache"}
	cpus := []string{"100m", "250m", "500m", "1", "2", "4"}
	mems := []string{"128Mi", "512Mi", "1Gi", "4Gi", "8Gi"}
	keys := []string{corev1.LabelTopologyZone, corev1.LabelHostname, karpv1.CapacityTypeLabelKey}
	randomPod := func(name string) *corev1.Pod {
		app := apps[r.Intn(len(apps))]
		opts := []podOption{withLabels("app", app)}
		zoneSelector := r.Intn(6) == 0
		if zoneSelector {
			opts = append(opts, nodeSelector(corev1.LabelTopologyZone, zones[r.Intn(len(zones))]))
		}
		if r.Intn(4) == 0 {
			// Solve counts a spread's pods on every node of a domain; with
			// nodeAffinityPolicy Honor the kube-scheduler counts only those
			// on nodes matching the pod's node affinity, which differs
			// when that affinity is on another key (documented in doc.go):
			// a zone-pinned pod spreads over zone or hostname only.
			key := keys[r.Intn(len(keys))]
			if zoneSelector {
				key = keys[r.Intn(2)]
			}
			opts = append(opts, spread(key, int32(1+r.Intn(2)), corev1.DoNotSchedule, sel("app", apps[r.Intn(len(apps))])))
		}
		if r.Intn(8) == 0 {
			opts = append(opts, spread(keys[r.Intn(2)], 1, corev1.ScheduleAnyway, sel("app", app)))
		}
		if r.Intn(8) == 0 {
			opts = append(opts, podAntiAffinity(keys[r.Intn(2)], sel("app", apps[r.Intn(len(apps))])))
		}
		if r.Intn(10) == 0 {
			opts = append(opts, podAffinity(keys[r.Intn(2)], sel("app", apps[r.Intn(len(apps))])))
		}
		if r.Intn(10) == 0 {
			opts = append(opts, preferredAntiAffinity(10, corev1.LabelHostname, sel("app", app)))
		}
		if r.Intn(10) == 0 {
			opts = append(opts, preferredNode(5, expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones[r.Intn(len(zones))])))
		}
		if r.Intn(10) == 0 {
			opts = append(opts, hostPort(int32(8080+r.Intn(2))))
		}
		return pod(name, cpus[r.Intn(len(cpus))], mems[r.Intn(len(mems))], opts...)
	}
	in := scheduling.Input{NodePools: []scheduling.NodePoolInput{pool(nodePool("any"))}, VolumeRequirements: map[types.UID][]corev1.NodeSelectorRequirement{}}
	for i := range r.Intn(5) {
		var running []*corev1.Pod
		for j := range r.Intn(4) {
			p := randomPod(fmt.Sprintf("run-%d-%d", i, j))
			p.Spec.Affinity = nil // running pods were placed by the kube-scheduler; keep them valid
			if r.Intn(3) == 0 {
				p.Spec.Affinity = nil
				podAntiAffinity(corev1.LabelHostname, sel("app", apps[r.Intn(len(apps))]))(p)
			}
			running = append(running, p)
		}
		in.ExistingNodes = append(in.ExistingNodes, existingNode(fmt.Sprintf("node-%d", i), zones[r.Intn(len(zones))], running...))
	}
	for i := range 30 + r.Intn(90) {
		p := randomPod(fmt.Sprintf("p-%03d", i))
		if r.Intn(12) == 0 {
			in.VolumeRequirements[p.UID] = []corev1.NodeSelectorRequirement{expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones[r.Intn(len(zones))])}
		}
		in.Pods = append(in.Pods, p)
	}
	return in
}

// TestPropertyKubeSchedulerAccepts solves 30 random clusters and checks,
// through checkInvariants, that the kube-scheduler's predicates accept
// every pod on the node it was placed on; and that Solve places most pods
// (random constraints make a few genuinely unschedulable).
func TestPropertyKubeSchedulerAccepts(t *testing.T) {
	placed, total := 0, 0
	for seed := int64(1); seed <= 30; seed++ {
		in := randomInput(seed)
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			res := solve(t, in)
			total += len(in.Pods)
			placed += len(in.Pods) - len(res.Unschedulable)
		})
	}
	if placed < total*9/10 {
		t.Errorf("placed %d of %d pods, want at least 90%%", placed, total)
	}
}
