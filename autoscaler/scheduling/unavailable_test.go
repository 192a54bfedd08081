package scheduling_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/scheduling"
)

// brokenPool is a NodePool labelling its nodes pool=broken, whose
// EC2NodeClass is not ready.
func brokenPool() scheduling.UnavailableNodePool {
	np := nodePool("broken", req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand"))
	np.Spec.Template.Labels = map[string]string{"pool": "broken"}
	return scheduling.UnavailableNodePool{NodePool: np, Reason: "EC2NodeClass nosubnet is not ready: SubnetsReady=False: spec.subnetSelectorTerms[0] matched no subnet"}
}

// TestUnavailableNodePoolReasonFirst: a pod only an unavailable NodePool
// can take is told that NodePool's cause first, and the other NodePools'
// taint and requirement mismatches after; a pod another NodePool takes is
// planned there, never on the unavailable one; a pod that does not fit
// the unavailable NodePool is told its mismatch after the real causes.
func TestUnavailableNodePoolReasonFirst(t *testing.T) {
	tainted := generalPurpose()
	tainted.Name = "gpu"
	tainted.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	onlyBroken := pod("only-broken", "1", "1Gi", nodeSelector("pool", "broken"))
	anywhere := pod("anywhere", "1", "1Gi")
	spot := pod("spot", "1", "1Gi", nodeSelector(karpv1.CapacityTypeLabelKey, "spot"))
	// Alphabetically and by weight, the other NodePools come first.
	in := scheduling.Input{Pods: []*corev1.Pod{onlyBroken, anywhere, spot},
		NodePools:            []scheduling.NodePoolInput{pool(tainted), pool(generalPurpose())},
		UnavailableNodePools: []scheduling.UnavailableNodePool{brokenPool()}}
	res := solve(t, in)

	err := res.Unschedulable[onlyBroken.UID]
	if err == nil || !strings.HasPrefix(err.Error(), `NodePool "broken" cannot launch nodes: EC2NodeClass nosubnet is not ready: SubnetsReady=False`) {
		t.Fatalf("only-broken: %v, want the broken NodePool's cause first", err)
	}
	for _, want := range []string{`incompatible with NodePool "general-purpose"`, `NodePool "gpu": taint dedicated=gpu:NoSchedule not tolerated`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("only-broken: %v, want it to contain %q", err, want)
		}
	}

	if err := res.Unschedulable[anywhere.UID]; err != nil {
		t.Fatalf("anywhere: %v", err)
	}
	for _, plan := range res.NewNodeClaims {
		if plan.NodePool.Name == "broken" {
			t.Fatalf("planned a NodeClaim of the unavailable NodePool")
		}
	}

	// general-purpose is on-demand only (a pool-side "no instance type"
	// answer); broken conflicts on capacity type; gpu is tainted.
	err = res.Unschedulable[spot.UID]
	if err == nil {
		t.Fatal("spot: scheduled, want unschedulable")
	}
	msg := err.Error()
	gp, broken, gpu := strings.Index(msg, `"general-purpose"`), strings.Index(msg, `incompatible with NodePool "broken"`), strings.Index(msg, `NodePool "gpu"`)
	if gp < 0 || broken < 0 || gpu < 0 || gp > broken || gp > gpu {
		t.Errorf("spot: %q, want general-purpose's cause before the incompatible broken and gpu NodePools", msg)
	}
	if strings.Contains(msg, "cannot launch nodes") {
		t.Errorf("spot: %q names the unavailable NodePool's state although the pod does not fit it", msg)
	}

	// Only unavailable NodePools: the pod is told why, not "no NodePools".
	res = solve(t, scheduling.Input{Pods: []*corev1.Pod{onlyBroken}, UnavailableNodePools: []scheduling.UnavailableNodePool{brokenPool()}})
	if err := res.Unschedulable[onlyBroken.UID]; err == nil || !strings.HasPrefix(err.Error(), `NodePool "broken" cannot launch nodes`) {
		t.Errorf("only unavailable NodePools: %v", err)
	}
}
