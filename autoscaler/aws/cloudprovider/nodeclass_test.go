package cloudprovider

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

func TestDeleteLaunchTemplatesOfClassOnly(t *testing.T) {
	other := defaultNodeClass()
	other.Name = "other"
	e := newSimEnv(t, defaultNodeClass(), other)
	ctx := context.Background()
	if _, err := e.cp.Create(ctx, nodeClaim("a", in(corev1.LabelInstanceTypeStable, "m5.large"))); err != nil {
		t.Fatal(err)
	}
	b := nodeClaim("b", in(corev1.LabelInstanceTypeStable, "m5.large"))
	b.Spec.NodeClassRef.Name = "other"
	if _, err := e.cp.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	n, err := e.cp.DeleteLaunchTemplates(ctx, "default")
	if err != nil || n != 1 {
		t.Fatalf("DeleteLaunchTemplates = %d, %v; want 1", n, err)
	}
	out, err := e.api.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.LaunchTemplates) != 1 {
		t.Fatalf("%d launch templates left, want the other class's 1", len(out.LaunchTemplates))
	}
	for _, tag := range out.LaunchTemplates[0].Tags {
		if *tag.Key == "karpenter.k8s.aws/ec2nodeclass" && *tag.Value != "other" {
			t.Errorf("kept a template of class %s", *tag.Value)
		}
	}
	// The next launch of the class recreates its template.
	if _, err := e.cp.Create(ctx, nodeClaim("c", in(corev1.LabelInstanceTypeStable, "m5.large"))); err != nil {
		t.Fatal(err)
	}
	if c := e.sim.Counts()["CreateLaunchTemplate"]; c != 3 {
		t.Errorf("CreateLaunchTemplate = %d, want 3", c)
	}
}

// TestAllocatableHonoursKubeletAndLearning: instance types carry the
// estimate under spec.kubelet until a Node of (type, AMI) registers.
func TestAllocatableHonoursKubeletAndLearning(t *testing.T) {
	class := defaultNodeClass()
	class.Spec.Kubelet = &v1.KubeletConfiguration{SystemReserved: map[string]string{"memory": "1Gi"}}
	e := newSimEnv(t, class)
	ctx := context.Background()
	its, err := e.cp.GetInstanceTypes(ctx, nodePool("default"))
	if err != nil {
		t.Fatal(err)
	}
	if m := find(its, "m5.large").Allocatable.Memory(); m.String() != "5879Mi" {
		t.Errorf("m5.large memory with 1Gi system-reserved = %s, want 5879Mi (6903Mi − 1Gi)", m)
	}
	got, err := e.cp.Create(ctx, nodeClaim("learn", in(corev1.LabelInstanceTypeStable, "m5.large")))
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Status.Allocatable.Memory(); m.String() != "5879Mi" {
		t.Errorf("launched NodeClaim's allocatable memory %s, want the estimate 5879Mi", m)
	}
	node := &corev1.Node{}
	node.Name = "ip-10-0-0-1.ec2.internal"
	node.Labels = map[string]string{}
	for k, v := range got.Labels {
		node.Labels[k] = v
	}
	node.Labels["karpenter.k8s.aws/ec2nodeclass"] = "default"
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceMemory: mustQ("5000Mi"), corev1.ResourceCPU: mustQ("1930m"), corev1.ResourcePods: mustQ("29")}
	key, ok, err := e.cp.ObserveNode(ctx, node)
	if err != nil || !ok || key.InstanceType != "m5.large" || key.AMIID != got.Status.ImageID {
		t.Fatalf("ObserveNode = %+v %v %v (launched image %s)", key, ok, err, got.Status.ImageID)
	}
	its, err = e.cp.GetInstanceTypes(ctx, nodePool("default"))
	if err != nil {
		t.Fatal(err)
	}
	if m := find(its, "m5.large").Allocatable.Memory(); m.String() != "5000Mi" {
		t.Errorf("m5.large memory after a Node registered = %s, want the observed 5000Mi", m)
	}
}

func mustQ(s string) resource.Quantity { return resource.MustParse(s) }

// TestRoleWaitsForInstanceProfile: a class with spec.role launches nothing
// until status.instanceProfile is set: before the status controller
// created it the error is transient, once InstanceProfileReady is False it
// is NodeClassNotReady with that condition's message.
func TestRoleWaitsForInstanceProfile(t *testing.T) {
	pending := defaultNodeClass()
	pending.Name, pending.Status = "pending", v1.EC2NodeClassStatus{}
	denied := defaultNodeClass()
	denied.Name, denied.Status = "denied", v1.EC2NodeClassStatus{Conditions: []metav1.Condition{{Type: v1.ConditionTypeInstanceProfileReady,
		Status: metav1.ConditionFalse, Reason: "RoleNotFound", Message: `spec.role "KarpxNodeRole": IAM role not found`}}}
	e := newSimEnv(t, pending, denied)
	ctx := context.Background()
	var notReady *cloudprovider.NodeClassNotReadyError
	_, err := e.cp.GetInstanceTypes(ctx, nodePool("pending"))
	if err == nil || errors.As(err, &notReady) || !strings.Contains(err.Error(), "not created yet") {
		t.Errorf("without status.instanceProfile: %v, want a transient error", err)
	}
	_, err = e.cp.GetInstanceTypes(ctx, nodePool("denied"))
	if !errors.As(err, &notReady) || !strings.Contains(err.Error(), `spec.role "KarpxNodeRole": IAM role not found`) {
		t.Errorf("with InstanceProfileReady=False: %v, want NodeClassNotReady with the condition's message", err)
	}
}
