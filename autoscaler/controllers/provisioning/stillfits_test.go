package provisioning

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// A pod nominated to a registered NodeClaim whose Node kube-scheduler
// gave to another pod (the room, or the hostname its required
// anti-affinity excludes) is planned again in the same pass instead of
// waiting for that NodeClaim to initialise; it keeps waiting when the
// bound pod leaves it room and does not conflict, while the NodeClaim has
// no Node, and while the Node would not take it even empty (still
// starting: its GPU not advertised yet, scenario P4).
func TestNominationEndsWhenTheNodeWasTaken(t *testing.T) {
	gpuPod := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
		return p
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	nginx := map[string]string{"app": "nginx"}
	antiNginx := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: nginx}, TopologyKey: corev1.LabelHostname}}}}
	pod := func(name, cpu string, labels map[string]string, aff *corev1.Affinity) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), Labels: labels},
			Spec: corev1.PodSpec{Affinity: aff, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	}
	for _, tc := range []struct {
		name     string
		hasNode  bool
		bound    *corev1.Pod // bound to the Node by kube-scheduler
		nominee  *corev1.Pod
		wantWait bool
	}{
		{"no Node yet", false, nil, pod("p", "1", nginx, antiNginx), true},
		{"Node free", true, nil, pod("p", "1", nginx, antiNginx), true},
		{"other pod bound, room left", true, pod("q", "500m", nil, nil), pod("p", "1", nginx, antiNginx), true},
		{"other pod took the room", true, pod("q", "1500m", nil, nil), pod("p", "1", nil, nil), false},
		{"anti-affinity pod took the hostname", true, pod("q", "100m", nginx, antiNginx), pod("p", "100m", nginx, antiNginx), false},
		// P4: the Node is up before its device plugin advertises the GPU.
		{"Node starting, GPU not advertised yet", true, nil, gpuPod(pod("p", "100m", nil, nil)), true},
		{"Node starting, GPU not advertised yet, other pod bound", true, pod("q", "100m", nil, nil), gpuPod(pod("p", "100m", nil, nil)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := claimAt(t0, t0, t0)
			nc.Status.ProviderID = "aws:///us-east-1a/i-1"
			state := &clusterstate.Snapshot{NodeClaims: map[string]*karpv1.NodeClaim{nc.Name: nc}, Nodes: map[string]*corev1.Node{},
				NodeClaimOf: map[string]*karpv1.NodeClaim{}, Pods: map[string][]*corev1.Pod{}}
			alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("10")}
			existing := scheduling.ExistingNode{Name: "nodeclaim/" + nc.Name, Available: alloc}
			if tc.hasNode {
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelHostname: "n1"}},
					Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}}
				state.Nodes[node.Name], state.NodeClaimOf[node.Name] = node, nc
				existing = scheduling.ExistingNode{Name: node.Name, Labels: node.Labels, Available: alloc}
				if tc.bound != nil {
					tc.bound.Spec.NodeName = node.Name
					existing.Pods = []*corev1.Pod{tc.bound}
					cpu := existing.Available[corev1.ResourceCPU]
					cpu.Sub(tc.bound.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU])
					existing.Available[corev1.ResourceCPU] = cpu
				}
			}
			if state.NodeOf(nc) == nil && tc.hasNode {
				t.Fatal("test setup: the Node is not found as the NodeClaim's")
			}
			in := scheduling.Input{ExistingNodes: []scheduling.ExistingNode{existing}}
			p := &Provisioner{opts: Options{}}
			p.opts.defaults()
			p.nominated.set(tc.nominee.UID, nc.Name)
			plan, waiting := p.waitForNominations(state, in, []*corev1.Pod{tc.nominee}, t0.Add(time.Second))
			if got := waiting == 1 && len(plan) == 0; got != tc.wantWait {
				t.Errorf("pod waits for its NodeClaim = %v (planned %d), want %v", got, len(plan), tc.wantWait)
			}
			if !tc.wantWait && p.nominated.get(tc.nominee.UID) != "" {
				t.Error("the nomination to a taken Node is kept")
			}
		})
	}
}

// A pod waiting for its in-flight NodeClaim counts there for the pods
// planned after it: one with a required hostname anti-affinity against
// it is not planned onto the same NodeClaim (karpx did, and one of the
// two lost its place when the Node came up, again and again: 4
// NodeClaims for one pod in the 500-pod burst); without the
// anti-affinity, it is.
func TestNominatedPodCountsForAntiAffinity(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	nginx := map[string]string{"app": "nginx"}
	antiNginx := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: nginx}, TopologyKey: corev1.LabelHostname}}}}
	for _, anti := range []bool{true, false} {
		pod := func(name string) *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), Labels: nginx},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
			if anti {
				p.Spec.Affinity = antiNginx
			}
			return p
		}
		waiting, next := pod("waiting"), pod("next")
		nc := claimAt(t0, t0)
		state := &clusterstate.Snapshot{NodeClaims: map[string]*karpv1.NodeClaim{nc.Name: nc}, Nodes: map[string]*corev1.Node{},
			NodeClaimOf: map[string]*karpv1.NodeClaim{}, Pods: map[string][]*corev1.Pod{}}
		in := scheduling.Input{ExistingNodes: []scheduling.ExistingNode{{Name: "nodeclaim/" + nc.Name,
			Available: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("10")}}}}
		p := &Provisioner{opts: Options{}}
		p.opts.defaults()
		p.nominated.set(waiting.UID, nc.Name)
		plan, n := p.waitForNominations(state, in, []*corev1.Pod{waiting, next}, t0.Add(time.Second))
		if n != 1 || len(plan) != 1 || plan[0] != next {
			t.Fatalf("anti-affinity %v: planned %d pods (%d waiting), want next planned and waiting waiting", anti, len(plan), n)
		}
		in.Pods = plan
		out := scheduling.Solve(in)
		if placed := len(out.ExistingPlacements["nodeclaim/"+nc.Name]) == 1; placed == anti {
			t.Errorf("anti-affinity %v: next placed on the NodeClaim the waiting pod holds = %v, want %v", anti, placed, !anti)
		}
	}
}
