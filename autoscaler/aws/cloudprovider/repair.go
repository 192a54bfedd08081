package cloudprovider

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// repairPolicies are the AWS provider's node repair policies, the
// conditions and toleration durations of aws/karpenter-provider-aws
// pkg/cloudprovider/cloudprovider.go@v1.14.0 (RepairPolicies): kubelet's
// Ready False or Unknown for 30 minutes, and the conditions the EKS node
// monitoring agent posts (AWS, "Detect node health issues and enable
// automatic node repair", EKS User Guide): AcceleratedHardwareReady False
// for 10 minutes, StorageReady, NetworkingReady, KernelReady and
// ContainerRuntimeReady False for 30 minutes.
var repairPolicies = []cloudprovider.RepairPolicy{
	{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
	{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionUnknown, TolerationDuration: 30 * time.Minute},
	{ConditionType: "AcceleratedHardwareReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 10 * time.Minute},
	{ConditionType: "StorageReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
	{ConditionType: "NetworkingReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
	{ConditionType: "KernelReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
	{ConditionType: "ContainerRuntimeReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
}

var _ cloudprovider.RepairPolicyProvider = (*CloudProvider)(nil)

// RepairPolicies returns the AWS node repair policies (see repairPolicies
// for the list and its source). The slice is shared: callers must not
// modify it.
func (c *CloudProvider) RepairPolicies() []cloudprovider.RepairPolicy {
	return repairPolicies
}
