package upstream

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/ec2sim"
	"github.com/karpx/karpx/test/problems"
)

// The capacity-block timeline (test/e2e TestCapacityBlockExpiry): the
// block ends 40 minutes (Karpenter's capacityReservationExpirationPeriod,
// apis/v1/ec2nodeclass_status.go@v1.14.3) after upstreamBlockLaunchWindow,
// and ec2sim terminates what is still in it upstreamBlockDrainWindow after
// it started expiring, standing in for EC2's 10 minutes. Karpenter
// launches onto the block in about 20 s on an idle machine (karpx: 5 s),
// so its launch window is longer than karpx's; its drain window covers
// the controller's 1-minute requeue.
const (
	upstreamBlockLaunchWindow = 60 * time.Second
	upstreamBlockDrainWindow  = 90 * time.Second
	labelReservationID        = "karpenter.k8s.aws/capacity-reservation-id"
)

// TestUpstreamCapacityBlockExpiry is the control of karpx's
// TestCapacityBlockExpiry on the real Karpenter AWS provider v1.14.3 with
// FEATURE_GATES=ReservedCapacity=true: two pods on two nodes in a
// Capacity Block of two m5.large. Karpenter's
// capacityreservation.expiration controller deletes the block's NodeClaims
// once the block is within 40 minutes of its end (it checks every
// minute); the test records when, how long after the 40-minute mark, and
// where the replacements went, and checks that nothing was left in the
// block for ec2sim to terminate.
func TestUpstreamCapacityBlockExpiry(t *testing.T) {
	e := startAWSEnv(t, 10*time.Minute, "ReservedCapacity=true", nil)
	ctx, c, kube, sim := e.ctx, e.cluster, e.kube, e.sim
	start := time.Now()
	expiringAt := start.Add(upstreamBlockLaunchWindow)
	end := expiringAt.Add(40 * time.Minute)
	terminationAt := expiringAt.Add(upstreamBlockDrainWindow)
	if err := sim.SetCapacityBlockTerminationLead(end.Sub(terminationAt)); err != nil {
		t.Fatal(err)
	}
	block, err := sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 2, ReservationType: ec2sim.ReservationTypeCapacityBlock, EndDate: end, Tags: map[string]string{"team": "ml"}})
	if err != nil {
		t.Fatal(err)
	}
	class := EC2NodeClassYAML("default", c.Name, "al2023@latest") + "  capacityReservationSelectorTerms: [{tags: {team: ml}}]\n"
	if _, err := c.Kubectl(ctx, []byte(class), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	pool := nodePool("block", "default", map[string]string{"block": "yes"})
	pool.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
		{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}},
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeReserved, karpv1.CapacityTypeOnDemand}},
	}
	if err := kube.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := kube.Create(ctx, deployment("web", 2, "1500m", map[string]string{"block": "yes"})); err != nil {
		t.Fatal(err)
	}
	blockClaims, blockNodes := map[string]bool{}, map[string]bool{}
	e.eventually(time.Until(expiringAt), "2 web pods Running on Karpenter's NodeClaims in the capacity block before it expires", func(ctx context.Context) (bool, error) {
		claims, err := e.claimsOf(ctx, "block")
		if err != nil {
			return false, nil
		}
		clear(blockClaims)
		clear(blockNodes)
		for _, nc := range claims {
			if nc.Labels[labelReservationID] == block && nc.Status.NodeName != "" {
				blockClaims[nc.Name], blockNodes[nc.Status.NodeName] = true, true
			}
		}
		return len(blockNodes) == 2 && runningOn(ctx, kube, "web", blockNodes, true) == 2, nil
	})
	launched := time.Since(start)

	deleted := map[string]time.Time{}
	e.eventually(time.Until(terminationAt), "Karpenter deletes the block's NodeClaims and the web pods run elsewhere before ec2sim terminates the block", func(ctx context.Context) (bool, error) {
		var list karpv1.NodeClaimList
		if err := kube.List(ctx, &list); err != nil {
			return false, nil
		}
		live := map[string]bool{}
		for _, nc := range list.Items {
			live[nc.Name] = nc.DeletionTimestamp.IsZero()
		}
		for name := range blockClaims {
			if !live[name] && deleted[name].IsZero() {
				deleted[name] = time.Now()
			}
		}
		return len(deleted) == len(blockClaims) && runningOn(ctx, kube, "web", blockNodes, false) == 2, nil
	})
	drained := time.Now()
	var first, last time.Time
	for name, at := range deleted {
		if at.Before(expiringAt) {
			t.Errorf("Karpenter deleted NodeClaim %s at %s, before the block started expiring at %s", name, at.Format(time.RFC3339), expiringAt.Format(time.RFC3339))
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	time.Sleep(time.Until(terminationAt.Add(2 * time.Second)))
	var killed []string
	for _, in := range sim.Instances() {
		if in.CapacityReservationID == block && in.TerminationTime != nil && !in.TerminationTime.Before(terminationAt) {
			killed = append(killed, in.ID)
		}
	}
	if len(killed) > 0 {
		t.Errorf("ec2sim terminated instances %v still in the block at its termination time", killed)
	}
	replacements := map[string]int{}
	claims, err := e.claimsOf(ctx, "block")
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range claims {
		if nc.DeletionTimestamp.IsZero() {
			replacements[fmt.Sprintf("%s%s", nc.Labels[karpv1.CapacityTypeLabelKey], map[bool]string{true: " in the block"}[nc.Labels[labelReservationID] == block])]++
		}
	}
	problems.Logf(t, "scenario capacity-block upstream: Karpenter %s launched on the block in %s; deleted its NodeClaims %s-%s and the pods Running off it %s after it started expiring (ec2sim terminates it %s after); replacements %v; instances killed by the block's end %d",
		AWSVersion, launched.Round(time.Second), first.Sub(expiringAt).Round(100*time.Millisecond), last.Sub(expiringAt).Round(100*time.Millisecond),
		drained.Sub(expiringAt).Round(100*time.Millisecond), upstreamBlockDrainWindow, replacements, len(killed))
}

// runningOn counts the Running pods of app on (on) or off (!on) nodes.
func runningOn(ctx context.Context, kube client.Client, app string, nodes map[string]bool, on bool) int {
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		return 0
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() && p.Spec.NodeName != "" && nodes[p.Spec.NodeName] == on {
			n++
		}
	}
	return n
}
