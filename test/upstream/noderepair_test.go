package upstream

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/ec2sim"
)

// TestUpstreamNodeRepair runs karpx's node repair scenario
// (test/e2e TestNodeRepair, docs/node-repair.md) on the real Karpenter
// AWS provider with FEATURE_GATES=NodeRepair=true: ec2sim's simulated
// kubelet reports Ready=False on the one Node of NodePool general since
// 30 s short of the AWS provider's 30-minute toleration. Karpenter leaves
// it for most of those 30 s, then annotates its NodeClaim
// karpenter.sh/nodeclaim-termination-timestamp and deletes it, and the
// pod runs on a new node: the simulator's fault (a lastTransitionTime in
// the past) is read by Karpenter as by karpx, and karpx's semantics are
// Karpenter's.
func TestUpstreamNodeRepair(t *testing.T) {
	e := startAWSEnv(t, 10*time.Minute, "NodeRepair=true", nil)
	ctx, c, kube, sim := e.ctx, e.cluster, e.kube, e.sim

	if _, err := c.Kubectl(ctx, []byte(EC2NodeClassYAML("default", c.Name, "al2023@latest")), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if err := kube.Create(ctx, nodePool("general", "default", nil)); err != nil {
		t.Fatal(err)
	}
	if err := kube.Create(ctx, deployment("web", 1, "1", nil)); err != nil {
		t.Fatal(err)
	}
	var old karpv1.NodeClaim
	e.eventually(4*time.Minute, "web Running on an Initialized NodeClaim", func(ctx context.Context) (bool, error) {
		claims, err := e.claimsOf(ctx, "general")
		if err != nil || len(claims) != 1 || !conditionTrue(&claims[0], karpv1.ConditionTypeInitialized) {
			return false, nil
		}
		old = claims[0]
		return e.webRunningOff(ctx, ""), nil
	})

	const lead = 30 * time.Second
	due := time.Now().Add(lead)
	id := old.Status.ProviderID[strings.LastIndex(old.Status.ProviderID, "/")+1:]
	if err := sim.SetNodeCondition(ec2sim.NodeConditionFault{InstanceIDs: []string{id}, Type: corev1.NodeReady,
		Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Since: due.Add(-30 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for time.Until(due) > 5*time.Second {
		var nc karpv1.NodeClaim
		if err := kube.Get(ctx, client.ObjectKey{Name: old.Name}, &nc); err != nil {
			t.Fatal(err)
		}
		if !nc.DeletionTimestamp.IsZero() {
			t.Fatalf("Karpenter deleted the NodeClaim %s before the 30 minutes ran out", time.Until(due).Round(time.Second))
		}
		time.Sleep(time.Second)
	}
	e.eventually(time.Until(due)+90*time.Second, "Karpenter's NodeClaim annotated with the repair time and deleted", func(ctx context.Context) (bool, error) {
		var nc karpv1.NodeClaim
		if err := kube.Get(ctx, client.ObjectKey{Name: old.Name}, &nc); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		_, annotated := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]
		return !nc.DeletionTimestamp.IsZero() && annotated, nil
	})
	repaired := time.Now()
	e.eventually(4*time.Minute, "web Running on a new node", func(ctx context.Context) (bool, error) {
		return e.webRunningOff(ctx, old.Status.NodeName), nil
	})
	t.Logf("scenario node-repair upstream: Karpenter %s repaired the Ready=False node %s after its toleration, web Running elsewhere %s later",
		AWSVersion, repaired.Sub(due).Round(time.Second), time.Since(repaired).Round(time.Second))
}

// webRunningOff reports whether web's one pod is Running (not being
// deleted) on a Node other than not.
func (e *upstreamEnv) webRunningOff(ctx context.Context, not string) bool {
	var pods corev1.PodList
	if err := e.kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "web"}); err != nil {
		return false
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() && p.Spec.NodeName != not {
			return true
		}
	}
	return false
}
