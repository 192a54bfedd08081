package clusterstate

import (
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
