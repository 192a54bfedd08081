package upstream

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/ec2sim"
)

// TestUpstreamReservedCapacity runs karpx's reserved-capacity scenario
// (test/e2e TestReservedCapacity, docs/reserved-capacity.md) on the real
// Karpenter AWS provider with FEATURE_GATES=ReservedCapacity=true: three
// pods, one per m5.large, on a NodePool of m5.large in us-east-1a that
// allows reserved and on-demand capacity, whose EC2NodeClass selects a
// targeted ODCR of two m5.large there. Karpenter launches two nodes into
// the reservation (capacity type reserved, labelled with its id) and the
// third on-demand, reading ec2sim's DescribeCapacityReservations and
// launching through its CreateFleet: the differential control of karpx's
// behaviour, with the CreateFleet count of each side logged.
func TestUpstreamReservedCapacity(t *testing.T) {
	var cr string
	e := startAWSEnv(t, 10*time.Minute, "ReservedCapacity=true", func(sim *ec2sim.Simulator) {
		var err error
		cr, err = sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
			TotalInstanceCount: 2, InstanceMatchCriteria: ec2sim.MatchCriteriaTargeted, Tags: map[string]string{"team": "ml"}})
		if err != nil {
			t.Fatal(err)
		}
	})
	ctx, c, kube, sim := e.ctx, e.cluster, e.kube, e.sim

	class := EC2NodeClassYAML("default", c.Name, "al2023@latest") + "  capacityReservationSelectorTerms: [{tags: {team: ml}}]\n"
	if _, err := c.Kubectl(ctx, []byte(class), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	pool := nodePool("reserved", "default", map[string]string{"reserved": "yes"})
	pool.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
		{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}},
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeReserved, karpv1.CapacityTypeOnDemand}},
	}
	if err := kube.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := kube.Create(ctx, deployment("web", 3, "1500m", map[string]string{"reserved": "yes"})); err != nil {
		t.Fatal(err)
	}
	var got map[string][]string
	e.eventually(5*time.Minute, "3 web pods Running on Karpenter's NodeClaims", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "web"}); err != nil {
			return false, nil
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() {
				running++
			}
		}
		if running != 3 {
			return false, nil
		}
		claims, err := e.claimsOf(ctx, "reserved")
		if err != nil {
			return false, nil
		}
		got = map[string][]string{}
		for _, nc := range claims {
			id := nc.Labels["karpenter.k8s.aws/capacity-reservation-id"]
			got[id] = append(got[id], nc.Labels[karpv1.CapacityTypeLabelKey])
		}
		return true, nil
	})
	for id := range got {
		sort.Strings(got[id])
	}
	n := sim.Stats()["CreateFleet"].Requests
	t.Logf("scenario reserved-capacity upstream: Karpenter %s NodeClaims by reservation %v, CreateFleet called %d times for 3 nodes, reservation %+v",
		AWSVersion, got, n, sim.CapacityReservations()[0])
	if fmt.Sprint(got[cr]) != "[reserved reserved]" || fmt.Sprint(got[""]) != "[on-demand]" {
		t.Errorf("Karpenter's NodeClaims by reservation: %v, want 2 reserved in %s and 1 on-demand (karpx's TestReservedCapacity)", got, cr)
	}
}
