package problems

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpx/karpx/ec2sim"
)

// P1: launch-failure retry storm (PROBLEMS.md P1).
const (
	// P1Neighbours is the share of every EC2 token bucket (size and
	// refill rate) that the account's other clients use (CI, Terraform,
	// other controllers): the simulator leaves 40% to the autoscaler under
	// test (ec2sim.ThrottleConfig.Neighbours).
	P1Neighbours = 0.6
	// P1Storm is the number of pods for the broken NodePool, each needing
	// an m5.large of its own (P1PodCPU of its 2 vCPUs), as after a
	// migration from Cluster Autoscaler.
	P1Storm = 150
	// P1Healthy is the number of pods of the healthy NodePool, started
	// and Running before the storm.
	P1Healthy = 3
	// P1PodCPU and P1PodMemory are each pod's requests: one pod per
	// m5.large (2 vCPU, 8 GiB).
	P1PodCPU    = "1500m"
	P1PodMemory = "512Mi"
	// P1InstanceType is the only instance type of both NodePools.
	P1InstanceType = "m5.large"
	// P1Window is how long karpx's scenario watches the storm in real
	// time: 30 simulated minutes of karpx's own durations compressed 20x.
	// The real Karpenter's run compresses only its registration timeout
	// (test/upstream) and watches its own waves.
	P1Window = 90 * time.Second
	// P1RetryQuotaMessage is what aws-sdk-go-v2's standard retryer says
	// when its client-side retry quota (500 tokens, 5 per retry) is empty
	// (aws/retry/standard.go, "failed to get rate limit token, retry
	// quota exceeded, N available, M requested").
	P1RetryQuotaMessage = "retry quota exceeded"
)

// P1NeverJoinUserData is the broken EC2NodeClass's spec.userData: a
// custom bootstrap after which the instance runs but its kubelet never
// joins (ec2sim's "# karpx-sim: never-join" marker, ec2sim.Behavior).
const P1NeverJoinUserData = `#!/bin/bash
# karpx-sim: never-join
echo "a custom bootstrap that breaks kubelet's join"`

// P1Sim sets the P1 throttling on an ec2sim.Config: EC2's documented
// default buckets (ec2sim.DefaultThrottleConfig) with P1Neighbours of
// each used by others.
func P1Sim(c *ec2sim.Config) { c.Throttle.Neighbours = P1Neighbours }

// P2: "no instance types found" right after the controller starts.
const (
	// P2Delay is how long the simulator holds the first
	// DescribeInstanceTypes call after the restart.
	P2Delay = 20 * time.Second
	// P2Failures is how many DescribeInstanceTypes calls after the slow
	// one answer 503 Unavailable.
	P2Failures = 3
	// P2PodCPU is each pod's CPU request: one pod per m5.large.
	P2PodCPU = "1500m"
	// P2InstanceType is the NodePool's only instance type.
	P2InstanceType = "m5.large"
)

// P2Faults are the fault rules added to the simulator at the restart: the
// next DescribeInstanceTypes call waits P2Delay, the P2Failures after it
// fail with Unavailable (HTTP 503, EC2's "the server is overloaded").
func P2Faults() []ec2sim.FaultRule {
	return []ec2sim.FaultRule{
		{Action: "DescribeInstanceTypes", Latency: metav1.Duration{Duration: P2Delay}, Count: 1},
		{Action: "DescribeInstanceTypes", Code: "Unavailable", Count: P2Failures},
	}
}

// P3: one AMI alias, several AMIs, and capacity never learned.
const (
	// P3AMIAlias resolves to four AMIs in the simulator: x86_64 and
	// arm64, standard and NVIDIA.
	P3AMIAlias = "bottlerocket@latest"
	// P3Image names the simulator's standard x86_64 Bottlerocket image,
	// the one launched for m5 types.
	P3Image = "bottlerocket-aws-k8s-1.35-x86_64"
	// P3PodMemory fits m5.large's estimated allocatable memory (6903Mi in
	// karpx's catalogue and in Karpenter's computation) but not its real
	// one under P3Reserve (5879Mi).
	P3PodMemory = "6400Mi"
	// P3PodCPU is the pod's CPU request.
	P3PodCPU = "100m"
)

// P3InstanceTypes are the NodePool's types: the undersized one first.
var P3InstanceTypes = []string{"m5.large", "m5.xlarge"}

// P3Reserve is how much more memory P3Image's nodes reserve than the
// estimate assumes.
var P3Reserve = resource.MustParse("1Gi")

// P3ImageAllocatable is the simulator rule that makes P3Image's Nodes
// report P3Reserve less allocatable memory (ec2sim.Simulator.
// SetImageAllocatable).
func P3ImageAllocatable() ec2sim.ImageAllocatable {
	n := P3Reserve.DeepCopy()
	n.Neg()
	return ec2sim.ImageAllocatable{NameContains: P3Image, Offset: corev1.ResourceList{corev1.ResourceMemory: n}}
}

// P4: a second node launched for pods that already have one.
const (
	// P4Behavior is the field report of P4 with every time divided by 5
	// (report → here, from the instance's launch): the node boots in 20 s
	// → 4 s; Cilium's node.cilium.io/agent-not-ready taint stays 60 s →
	// 12 s after the Node registered; the GPU device plugin advertises
	// nvidia.com/gpu 14 s after the Node was created; kubelet restarts
	// 26 s after creation and the Node is NotReady for 4 s. The simulator
	// reads it from instance tag ec2sim.BehaviorTagKey, set through the
	// EC2NodeClass's spec.tags.
	P4Behavior = "boot-delay=4s late-taint=node.cilium.io/agent-not-ready=true:NoExecute@12s " +
		"late-resource=nvidia.com/gpu@14s not-ready-window=26s+4s"
	// P4CiliumTaint is the agent's taint, not declared by the NodePool.
	P4CiliumTaint = "node.cilium.io/agent-not-ready"
	// P4Pods is the number of pending pods, each requesting one
	// nvidia.com/gpu: the first plan needs exactly P4Pods NodeClaims.
	P4Pods = 4
	// P4GPUCount is the instance-gpu-count the NodePool requires.
	P4GPUCount = "1"
)

// P4NudgeRounds is how many times P4NudgePending updates the pending
// pods, P4NudgeGap apart.
const (
	P4NudgeRounds = 2
	P4NudgeGap    = 3 * time.Second
)

// P4NudgeAnnotation is the pod annotation P4NudgePending sets (to the
// round's number, from 0).
const P4NudgeAnnotation = "karpx.test/nudge"

// P4NudgePending updates the pending pods (no spec.nodeName) of app
// (label app=<app>, namespace default) P4NudgeRounds times, P4NudgeGap
// apart, by a merge patch of P4NudgeAnnotation. Each update triggers an
// autoscaler's provisioning pass, so both sides plan while the first
// plan's Nodes initialise, as a busy cluster does, instead of depending on
// when kube-scheduler happens to update the pods. A pod deleted meanwhile
// is skipped; it returns the first other error of listing or patching,
// or ctx's error.
func P4NudgePending(ctx context.Context, c client.Client, app string) error {
	for round := range P4NudgeRounds {
		if round > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(P4NudgeGap):
			}
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
			return fmt.Errorf("listing the pods of app %s: %w", app, err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Spec.NodeName != "" {
				continue
			}
			patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"%d"}}}`, P4NudgeAnnotation, round))
			if err := c.Patch(ctx, p, patch); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("updating pod %s: %w", p.Name, err)
			}
		}
	}
	return nil
}

// P5: WhenEmpty NodePools stop scaling down.
const (
	// P5ConsolidateAfter is the WhenEmpty pool's consolidateAfter.
	P5ConsolidateAfter = 10 * time.Second
	// P5Slack is how long past consolidateAfter an empty node may stay
	// (disruption passes, drain, termination).
	P5Slack = 30 * time.Second
	// P5InstanceType is the WhenEmpty pool's only type; P5PodCPU puts
	// one workload pod on each.
	P5InstanceType = "m5.large"
	P5PodCPU       = "1200m"
)

// P5AgentDaemonSet is the DaemonSet of problem P5's scenario, in
// namespace default: one pause pod per Node (10m CPU, 16Mi memory,
// tolerating every taint) like a cluster's node agent, so that a Node
// whose workload left is empty of everything but DaemonSet pods, which
// emptiness must not count.
func P5AgentDaemonSet() *appsv1.DaemonSet {
	labels := map[string]string{"app": "agent"}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "agent", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}},
				},
			},
		},
	}
}
