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
	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/ec2sim"
)

// reservedCapacity runs three one-node pods on a NodePool of m5.large in
// us-east-1a that allows reserved and on-demand capacity, whose
// EC2NodeClass selects a targeted ODCR of two m5.large there, with
// --feature-gates gate. It waits for the pods to run and returns the env,
// the reservation's id and the NodeClaims' capacity types by reservation
// id ("" for none).
func reservedCapacity(t *testing.T, name, gate string) (*env, string, map[string][]string) {
	e := newEnvWithLog(t, name, func(o *operator.Options) { o.FeatureGates = gate }, nil)
	cr, err := e.sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 2, InstanceMatchCriteria: ec2sim.MatchCriteriaTargeted, Tags: map[string]string{"team": "ml"}})
	if err != nil {
		t.Fatal(err)
	}
	pool := nodePool{Name: "reserved", Labels: map[string]string{"reserved": "yes"}, InstanceTypes: []string{"m5.large"},
		CapacityTypes: []string{"reserved", onDemand}, Disruption: neverConsolidate,
		Requirements: []string{"{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}"}}
	e.apply(ec2NodeClassYAML("reserved", e.name)+"  capacityReservationSelectorTerms: [{tags: {team: ml}}]\n", pool.yaml())
	// One pod per m5.large (2 vCPU).
	web := deployment("web", 3, "1500m", "256Mi")
	web.Spec.Template.Spec.NodeSelector = map[string]string{"reserved": "yes"}
	if err := e.kube.Create(e.ctx, web); err != nil {
		t.Fatal(err)
	}
	e.eventually(180*time.Second, "3 web pods Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "web") == 3, nil
	})
	byReservation := map[string][]string{}
	for _, nc := range e.nodeClaims() {
		id := nc.Labels[awscloud.LabelCapacityReservationID]
		byReservation[id] = append(byReservation[id], nc.Labels[karpv1.CapacityTypeLabelKey])
	}
	return e, cr, byReservation
}

// TestReservedCapacity: with Karpenter's ReservedCapacity gate, two of the
// three nodes launch into the reservation (capacity type reserved, labelled
// with its id) and the third, once it is full, on-demand; CreateFleet is
// called at most twice per node (no retry storm on the full reservation).
// The control, TestReservedCapacityGateOff, is karpx without the gate (and
// every karpx before it): all three on-demand, the paid-for reservation
// idle.
func TestReservedCapacity(t *testing.T) {
	runInParallel(t)
	e, cr, got := reservedCapacity(t, "karpx-reserved", "ReservedCapacity=true")
	if fmt.Sprint(got[cr]) != "[reserved reserved]" || fmt.Sprint(got[""]) != "[on-demand]" {
		t.Fatalf("NodeClaims by reservation: %v, want 2 reserved in %s and 1 on-demand", got, cr)
	}
	if st := e.sim.CapacityReservations()[0]; len(st.Instances) != 2 || st.AvailableInstanceCount != 0 {
		t.Errorf("reservation %+v, want full with 2 instances", st)
	}
	// The Nodes carry the NodeClaims' labels (registration).
	var nodes corev1.NodeList
	if err := e.kube.List(e.ctx, &nodes, client.MatchingLabels{awscloud.LabelCapacityReservationID: cr}); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 2 {
		t.Errorf("%d Nodes labelled %s=%s, want 2", len(nodes.Items), awscloud.LabelCapacityReservationID, cr)
	}
	for _, n := range nodes.Items {
		if n.Labels[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeReserved || n.Labels[awscloud.LabelCapacityReservationType] != "default" {
			t.Errorf("Node %s labels %v", n.Name, n.Labels)
		}
	}
	n := e.sim.Stats()["CreateFleet"].Requests
	t.Logf("reserved: CreateFleet called %d times for 3 nodes", n)
	if n > 6 {
		t.Errorf("CreateFleet called %d times for 3 nodes, want at most 6", n)
	}
}

// TestReservedCapacityGateOff is TestReservedCapacity's control: without
// the gate the reservation is ignored, as Karpenter ignores it.
func TestReservedCapacityGateOff(t *testing.T) {
	runInParallel(t)
	e, _, got := reservedCapacity(t, "karpx-reserved-off", "ReservedCapacity=false")
	if fmt.Sprint(got[""]) != "[on-demand on-demand on-demand]" || len(got) != 1 {
		t.Fatalf("NodeClaims by reservation: %v, want 3 on-demand outside any", got)
	}
	if st := e.sim.CapacityReservations()[0]; len(st.Instances) != 0 {
		t.Errorf("reservation %+v, want unused", st)
	}
	t.Logf("gate off: CreateFleet called %d times for 3 nodes", e.sim.Stats()["CreateFleet"].Requests)
}
