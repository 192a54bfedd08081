package clusterstate

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

func TestSmallestAllocatableIsPerResourceMinimumOfCandidates(t *testing.T) {
	it := func(name, cpu, mem string) *cloudprovider.InstanceType {
		return &cloudprovider.InstanceType{Name: name, Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	nc := &karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{
		Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}}
	got := smallestAllocatable(nc, []*cloudprovider.InstanceType{it("a", "4", "2Gi"), it("b", "2", "8Gi"), it("c", "1", "1Gi")})
	if got.Cpu().String() != "2" || got.Memory().String() != "2Gi" {
		t.Fatalf("smallestAllocatable = cpu %s memory %s, want 2 and 2Gi (c is not a candidate)", got.Cpu(), got.Memory())
	}
}

// TestUnregisteredNodeWithoutNodeClaimIsNotCapacity: a Node that joined for
// an instance no NodeClaim holds (left for garbage collection) keeps its
// karpenter.sh/unregistered taint in the scheduling view, briefly NotReady
// or not, so pods that do not tolerate it are not planned onto it; the
// same Node with its NodeClaim is seen without that taint (registration
// removes it).
func TestUnregisteredNodeWithoutNodeClaimIsNotCapacity(t *testing.T) {
	now := time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		claimed   bool
		notReady  bool
		wantTaint bool
	}{
		{"no NodeClaim", false, false, true},
		{"no NodeClaim, briefly NotReady", false, true, true},
		{"with its NodeClaim", true, false, false},
		{"with its NodeClaim, briefly NotReady", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"},
				Spec:   corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1", Taints: []corev1.Taint{karpv1.UnregisteredNoExecuteTaint}},
				Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}
			if tc.notReady {
				node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-time.Second))}}
			}
			s := &Snapshot{Nodes: map[string]*corev1.Node{"n": node}, NodeClaims: map[string]*karpv1.NodeClaim{},
				NodeClaimOf: map[string]*karpv1.NodeClaim{}, Pods: map[string][]*corev1.Pod{}, Grace: &Grace{Now: now, Window: time.Minute}}
			if tc.claimed {
				nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc"}, Status: karpv1.NodeClaimStatus{ProviderID: node.Spec.ProviderID}}
				s.NodeClaims["nc"], s.NodeClaimOf["n"] = nc, nc
			}
			var got []corev1.Taint
			for _, en := range s.ExistingNodes(nil, nil) {
				if en.Name == "n" {
					got = en.Taints
				}
			}
			has := false
			for _, taint := range got {
				has = has || taint.Key == karpv1.UnregisteredTaintKey
			}
			if has != tc.wantTaint {
				t.Fatalf("scheduling view of the Node has karpenter.sh/unregistered=%v (taints %v), want %v", has, got, tc.wantTaint)
			}
		})
	}
}
