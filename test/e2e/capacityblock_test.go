package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	awscloud "github.com/karpx/karpx/autoscaler/aws/cloudprovider"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation"
	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/ec2sim"
)

// Timeline of the capacity-block scenario (test/upstream's
// TestUpstreamCapacityBlockExpiry has the same launch window and a longer
// drain window for Karpenter's 1-minute requeue): the block ends at start +
// capacityreservation.ExpiringWindow (40 minutes) + blockLaunchWindow, so
// that it starts expiring — the autoscaler's cue to drain — once its nodes
// had blockLaunchWindow to launch; ec2sim terminates what is still in it
// blockDrainWindow later (SetCapacityBlockTerminationLead), standing in
// for EC2's 10 minutes between its expiration warning and its
// terminations. karpx launches onto the block in 5-12 s on an idle
// machine, 23-25 s beside other tests (-count=5 next to the upstream
// control), and deletes the block's NodeClaims within a second of the
// mark.
const (
	blockLaunchWindow = 60 * time.Second
	blockDrainWindow  = 60 * time.Second
)

// TestCapacityBlockExpiry: two pods run on two nodes in a Capacity Block
// of two m5.large (NodePool allowing reserved and on-demand, the
// ReservedCapacity gate on). When the block starts expiring, 40 minutes
// before its end, karpx's capacityreservation.expiration controller
// deletes both NodeClaims: their Nodes are drained, the pods are replaced
// on on-demand nodes (the expiring block is no longer offered), and the
// block's instances are terminated by karpx before ec2sim — as EC2 does 30
// minutes before the end — terminates what is left in the block: no pod is
// lost with its node. The control is the same scenario on the real
// Karpenter AWS provider v1.14.3 (test/upstream
// TestUpstreamCapacityBlockExpiry), which drains at the same mark, up to
// its 1-minute requeue later.
func TestCapacityBlockExpiry(t *testing.T) {
	runInParallel(t)
	e := newEnvWithLog(t, "karpx-capacity-block", func(o *operator.Options) { o.FeatureGates = "ReservedCapacity=true" }, nil)
	start := time.Now()
	expiringAt := start.Add(blockLaunchWindow)
	end := expiringAt.Add(capacityreservation.ExpiringWindow)
	terminationAt := expiringAt.Add(blockDrainWindow)
	if err := e.sim.SetCapacityBlockTerminationLead(end.Sub(terminationAt)); err != nil {
		t.Fatal(err)
	}
	block, err := e.sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 2, ReservationType: ec2sim.ReservationTypeCapacityBlock, EndDate: end, Tags: map[string]string{"team": "ml"}})
	if err != nil {
		t.Fatal(err)
	}
	pool := nodePool{Name: "block", Labels: map[string]string{"block": "yes"}, InstanceTypes: []string{"m5.large"},
		CapacityTypes: []string{"reserved", onDemand}, Disruption: neverConsolidate,
		Requirements: []string{"{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}"}}
	e.apply(ec2NodeClassYAML("block", e.name)+"  capacityReservationSelectorTerms: [{tags: {team: ml}}]\n", pool.yaml())
	web := deployment("web", 2, "1500m", "256Mi")
	web.Spec.Template.Spec.NodeSelector = map[string]string{"block": "yes"}
	if err := e.kube.Create(e.ctx, web); err != nil {
		t.Fatal(err)
	}
	e.eventually(blockLaunchWindow, "2 web pods Running on the capacity block before it expires", func(ctx context.Context) (bool, error) {
		return len(podsOnReservation(ctx, e.kube, block)) == 2, nil
	})
	launched := time.Since(start)
	blockNodes, blockClaims := map[string]bool{}, map[string]bool{}
	for _, nc := range e.nodeClaims() {
		if nc.Labels[awscloud.LabelCapacityReservationID] == block {
			if nc.Labels[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeReserved || nc.Labels[awscloud.LabelCapacityReservationType] != "capacity-block" {
				t.Errorf("NodeClaim %s labels %v", nc.Name, nc.Labels)
			}
			blockNodes[nc.Status.NodeName], blockClaims[nc.Name] = true, true
		}
	}

	// The drain: both block NodeClaims deleted (seen deleting or gone),
	// the pods Running on other nodes, before ec2sim's termination time.
	deleted := map[string]time.Time{}
	e.eventually(time.Until(terminationAt), "the block's NodeClaims deleted and 2 web pods Running elsewhere before ec2sim terminates the block", func(ctx context.Context) (bool, error) {
		var list karpv1.NodeClaimList
		if err := e.kube.List(ctx, &list); err != nil {
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
		return len(deleted) == len(blockClaims) && len(podsOnReservation(ctx, e.kube, block)) == 0 && runningOffNodes(ctx, e.kube, "web", blockNodes) == 2, nil
	})
	var lastDeleted time.Time
	for name, at := range deleted {
		if at.Before(expiringAt) {
			t.Errorf("NodeClaim %s deleted at %s, before the block started expiring at %s", name, at.Format(time.RFC3339), expiringAt.Format(time.RFC3339))
		}
		if at.After(lastDeleted) {
			lastDeleted = at
		}
	}
	drained := time.Now()
	// ec2sim's termination time passes; nothing of the block was left
	// for it.
	time.Sleep(time.Until(terminationAt.Add(2 * time.Second)))
	var inBlock int
	for _, in := range e.sim.Instances() {
		if in.CapacityReservationID != block {
			continue
		}
		inBlock++
		if in.TerminationTime == nil || !in.TerminationTime.Before(terminationAt) {
			t.Errorf("instance %s of the block: %s, terminated at %v; want terminated by karpx before %s", in.ID, in.State, in.TerminationTime, terminationAt.Format(time.RFC3339))
		}
	}
	if inBlock != 2 {
		t.Errorf("%d instances were launched into the block, want 2", inBlock)
	}
	if n := runningOffNodes(e.ctx, e.kube, "web", blockNodes); n != 2 {
		t.Errorf("%d web pods Running off the block after its termination time, want 2", n)
	}
	replacements := map[string]int{}
	for _, nc := range e.nodeClaims() {
		if nc.DeletionTimestamp.IsZero() {
			replacements[nc.Labels[karpv1.CapacityTypeLabelKey]]++
		}
	}
	if fmt.Sprint(replacements) != "map[on-demand:2]" {
		t.Errorf("NodeClaims after the drain by capacity type: %v, want 2 on-demand", replacements)
	}
	scenarioLogf(t, "scenario capacity-block karpx: launched on the block in %s; its NodeClaims deleted %s and the pods Running off it %s after it started expiring (ec2sim terminates it %s after); replacements %v",
		launched.Round(time.Second), lastDeleted.Sub(expiringAt).Round(100*time.Millisecond), drained.Sub(expiringAt).Round(100*time.Millisecond), blockDrainWindow, replacements)
}

// podsOnReservation returns the names of the Running pods on Nodes
// labelled with capacity reservation id.
func podsOnReservation(ctx context.Context, kube client.Client, id string) []string {
	var nodes corev1.NodeList
	if err := kube.List(ctx, &nodes, client.MatchingLabels{awscloud.LabelCapacityReservationID: id}); err != nil {
		return nil
	}
	on := map[string]bool{}
	for _, n := range nodes.Items {
		on[n.Name] = true
	}
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace("default")); err != nil {
		return nil
	}
	var out []string
	for _, p := range pods.Items {
		if on[p.Spec.NodeName] && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() {
			out = append(out, p.Name)
		}
	}
	return out
}

// runningOffNodes counts the Running pods of app on no Node of nodes.
func runningOffNodes(ctx context.Context, kube client.Client, app string, nodes map[string]bool) int {
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		return 0
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() && p.Spec.NodeName != "" && !nodes[p.Spec.NodeName] {
			n++
		}
	}
	return n
}
