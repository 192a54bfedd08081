package scheduling_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/scheduling"
)

// reservation is a capacity reservation of a test: Places free places of
// Type in us-east-1a.
type reservation struct {
	ID, Type string
	Places   int
}

// reservedTypes returns copies of the catalogue types named, each with a
// reserved offering per reservation of its type, priced and marked
// available as the AWS cloud provider does (on-demand price / 10,000,000;
// available while the reservation has a free place).
func reservedTypes(names []string, rs ...reservation) []*cloudprovider.InstanceType {
	var out []*cloudprovider.InstanceType
	for _, it := range allTypes() {
		if !slices.Contains(names, it.Name) {
			continue
		}
		cp := *it
		cp.Offerings = slices.Clone(it.Offerings)
		for _, r := range rs {
			if r.Type != it.Name {
				continue
			}
			od, _ := it.CheapestOffering(func(o cloudprovider.Offering) bool { return o.CapacityType == karpv1.CapacityTypeOnDemand })
			cp.Offerings = append(cp.Offerings, cloudprovider.Offering{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeReserved,
				PriceUSDPerHour: od.PriceUSDPerHour / 10_000_000, Available: r.Places > 0,
				ReservationID: r.ID, ReservationType: "default", ReservationCapacity: r.Places})
		}
		out = append(out, &cp)
	}
	return out
}

// reservedPool is a NodePool of the given types in us-east-1a allowing
// the capacity types given.
func reservedPool(types []string, capacityTypes ...string) *karpv1.NodePool {
	return nodePool("reserved",
		req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, types...),
		req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a"),
		req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, capacityTypes...))
}

// capacityTypesOf returns the plan's karpenter.sh/capacity-type
// requirement values.
func capacityTypesOf(p scheduling.NodeClaimPlan) []string {
	for _, r := range p.Requirements {
		if r.Key == karpv1.CapacityTypeLabelKey {
			return r.Values
		}
	}
	return nil
}

// checkReservationCaps verifies that no reservation is held by more plans
// than its smallest ReservationCapacity less the in-flight NodeClaims
// holding it, and that a plan holding one may launch reserved.
func checkReservationCaps(t *testing.T, in scheduling.Input, res scheduling.Result) {
	t.Helper()
	places := map[string]int{}
	for _, np := range in.NodePools {
		for _, it := range np.InstanceTypes {
			for _, o := range it.Offerings {
				if o.CapacityType != karpv1.CapacityTypeReserved || !o.Available {
					continue
				}
				if cur, ok := places[o.ReservationID]; !ok || o.ReservationCapacity < cur {
					places[o.ReservationID] = o.ReservationCapacity
				}
			}
		}
	}
	for _, n := range in.ExistingNodes {
		for _, id := range n.Reservations {
			places[id]--
		}
	}
	held := map[string]int{}
	for _, p := range res.NewNodeClaims {
		for _, id := range p.Reservations {
			held[id]++
		}
		if len(p.Reservations) > 0 && !slices.Contains(capacityTypesOf(p), karpv1.CapacityTypeReserved) {
			t.Errorf("plan holding %v may not launch reserved: %v", p.Reservations, p.Requirements)
		}
	}
	for id, n := range held {
		if n > max(places[id], 0) {
			t.Errorf("reservation %s held by %d plans, has %d places", id, n, places[id])
		}
	}
}

// TestReservationCapFallsBack: three pods that each need a whole m5.large,
// on a NodePool allowing reserved and on-demand, with a reservation of two
// free places. Two plans hold a place and may launch reserved (it is
// cheapest); the third falls back to on-demand instead of being planned
// onto the full reservation. A NodeClaim records its reservation.
func TestReservationCapFallsBack(t *testing.T) {
	types := []string{"m5.large"}
	in := scheduling.Input{Pods: pods(3, "web", "1500m", "256Mi"), NodePools: []scheduling.NodePoolInput{{
		NodePool:      reservedPool(types, karpv1.CapacityTypeReserved, karpv1.CapacityTypeOnDemand),
		InstanceTypes: reservedTypes(types, reservation{ID: "cr-1", Type: "m5.large", Places: 2})}}}
	res := solve(t, in)
	checkReservationCaps(t, in, res)
	if len(res.NewNodeClaims) != 3 || len(res.Unschedulable) != 0 {
		t.Fatalf("%d plans, unschedulable %v; want 3 plans", len(res.NewNodeClaims), res.Unschedulable)
	}
	var got []string
	for _, p := range res.NewNodeClaims {
		got = append(got, fmt.Sprintf("%v%v", p.Reservations, capacityTypesOf(p)))
	}
	want := "[[cr-1][on-demand reserved] [cr-1][on-demand reserved] [][on-demand]]"
	if fmt.Sprint(got) != want {
		t.Errorf("plans (reservations, capacity types) %v, want %s", got, want)
	}
	if p := res.NewNodeClaims[0]; p.PriceUSDPerHour > 0.001 {
		t.Errorf("first plan priced %g $/h, want the reserved price", p.PriceUSDPerHour)
	}
	if a := res.NewNodeClaims[0].NodeClaim().Annotations[scheduling.ReservationsAnnotationKey]; a != "cr-1" {
		t.Errorf("NodeClaim annotation %s=%q, want cr-1", scheduling.ReservationsAnnotationKey, a)
	}
	if _, ok := res.NewNodeClaims[2].NodeClaim().Annotations[scheduling.ReservationsAnnotationKey]; ok {
		t.Errorf("the on-demand NodeClaim carries %s", scheduling.ReservationsAnnotationKey)
	}
}

// TestReservationFullReservedOnly: with a NodePool allowing only reserved,
// the pod that finds the reservation full stays pending, told which
// reservation, how many places it had and who holds them, and the fix.
func TestReservationFullReservedOnly(t *testing.T) {
	types := []string{"m5.large"}
	in := scheduling.Input{Pods: pods(3, "web", "1500m", "256Mi"), NodePools: []scheduling.NodePoolInput{{
		NodePool:      reservedPool(types, karpv1.CapacityTypeReserved),
		InstanceTypes: reservedTypes(types, reservation{ID: "cr-1", Type: "m5.large", Places: 2})}}}
	res := solve(t, in)
	checkReservationCaps(t, in, res)
	if len(res.NewNodeClaims) != 2 || len(res.Unschedulable) != 1 {
		t.Fatalf("%d plans, unschedulable %v; want 2 plans and 1 pending pod", len(res.NewNodeClaims), res.Unschedulable)
	}
	for _, err := range res.Unschedulable {
		for _, want := range []string{`NodePool "reserved" may launch for the pod only into capacity reservations that are full`,
			"capacity reservation cr-1 (m5.large in us-east-1a): 0 free place(s) left of the 2 EC2 reports free, 2 by other NodeClaims of this scheduling pass",
			"allow on-demand or spot"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("reason %q, want it to contain %q", err, want)
			}
		}
	}
}

// TestReservationInFlightHolds: NodeClaims not launched yet that hold a
// place (ExistingNode.Reservations) count against it; with both places
// held, every new plan falls back to on-demand; a reservation the cloud
// provider reports full (no place, unavailable) leaves a reserved-only
// NodePool with a reason naming it.
func TestReservationInFlightHolds(t *testing.T) {
	types := []string{"m5.large"}
	inFlight := func(name string) scheduling.ExistingNode {
		return scheduling.ExistingNode{Name: "nodeclaim/" + name, Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.large"},
			Available: resources("cpu", "100m", "memory", "100Mi", "pods", "10"), Reservations: []string{"cr-1"}}
	}
	in := scheduling.Input{Pods: pods(2, "web", "1500m", "256Mi"),
		NodePools: []scheduling.NodePoolInput{{
			NodePool:      reservedPool(types, karpv1.CapacityTypeReserved, karpv1.CapacityTypeOnDemand),
			InstanceTypes: reservedTypes(types, reservation{ID: "cr-1", Type: "m5.large", Places: 3})}},
		ExistingNodes: []scheduling.ExistingNode{inFlight("a"), inFlight("b")}}
	res := solve(t, in)
	checkReservationCaps(t, in, res)
	var got []string
	for _, p := range res.NewNodeClaims {
		got = append(got, fmt.Sprint(p.Reservations))
	}
	if fmt.Sprint(got) != "[[cr-1] []]" {
		t.Errorf("plans' reservations %v, want one holding the last free place of cr-1 and one without", got)
	}

	in.Pods = pods(1, "ml", "1500m", "256Mi")
	in.NodePools[0].NodePool = reservedPool(types, karpv1.CapacityTypeReserved)
	in.NodePools[0].InstanceTypes = reservedTypes(types, reservation{ID: "cr-1", Type: "m5.large", Places: 2})
	res = solve(t, in)
	err := res.Unschedulable[in.Pods[0].UID]
	if err == nil || !strings.Contains(err.Error(), "0 free place(s) left of the 2 EC2 reports free, 2 held by NodeClaims not launched yet") {
		t.Errorf("reserved-only, both places in flight: %v", err)
	}

	in.NodePools[0].InstanceTypes = reservedTypes(types, reservation{ID: "cr-1", Type: "m5.large", Places: 0})
	res = solve(t, in)
	err = res.Unschedulable[in.Pods[0].UID]
	if err == nil || !strings.Contains(err.Error(), "capacity reservations that are full or expiring: cr-1 (m5.large in us-east-1a)") {
		t.Errorf("reserved-only, reservation reported full: %v", err)
	}
}

// TestReservationReleasedWhenNarrowed: a plan first holds a place in every
// reservation of the types it may launch (as Karpenter's scheduler, it
// reserves pessimistically); a pod that narrows it to m5.large gives
// c5.large's place back, so a later pod requiring c5.large gets it.
func TestReservationReleasedWhenNarrowed(t *testing.T) {
	types := []string{"m5.large", "c5.large"}
	in := scheduling.Input{
		Pods: []*corev1.Pod{
			pod("a", "1", "1Gi"),
			pod("b", "500m", "512Mi", nodeSelector(corev1.LabelInstanceTypeStable, "m5.large")),
			pod("c", "250m", "256Mi", nodeSelector(corev1.LabelInstanceTypeStable, "c5.large")),
		},
		NodePools: []scheduling.NodePoolInput{{
			NodePool: reservedPool(types, karpv1.CapacityTypeReserved, karpv1.CapacityTypeOnDemand),
			InstanceTypes: reservedTypes(types, reservation{ID: "cr-m", Type: "m5.large", Places: 1},
				reservation{ID: "cr-c", Type: "c5.large", Places: 1})}}}
	res := solve(t, in)
	checkReservationCaps(t, in, res)
	var got []string
	for _, p := range res.NewNodeClaims {
		var names []string
		for _, pd := range p.Pods {
			names = append(names, pd.Name)
		}
		got = append(got, fmt.Sprintf("%v%v", names, p.Reservations))
	}
	if fmt.Sprint(got) != "[[a b][cr-m] [c][cr-c]]" {
		t.Errorf("plans (pods, reservations) %v, want a and b holding cr-m, c holding cr-c", got)
	}
}

// BenchmarkSolveReserved is BenchmarkSolve with a reservation of one
// place on each of ten types in us-east-1a that BenchmarkSolve's
// plans end up on, so that plans hold, release and find
// reservations full: the cost of the reservation ledger.
func BenchmarkSolveReserved(b *testing.B) {
	var rs []reservation
	for k, name := range []string{"m8i.96xlarge", "r8i.96xlarge", "m8g.48xlarge", "c8g.48xlarge", "m9g.48xlarge", "r8g.48xlarge",
		"m6a.12xlarge", "m7g.12xlarge", "c6g.4xlarge", "c6a.4xlarge"} {
		rs = append(rs, reservation{ID: fmt.Sprintf("cr-%d", k), Type: name, Places: 1})
	}
	var names []string
	for _, it := range allTypes() {
		names = append(names, it.Name)
	}
	in := scheduling.Input{
		Pods:      benchPods(1000),
		NodePools: []scheduling.NodePoolInput{{NodePool: nodePool("default"), InstanceTypes: reservedTypes(names, rs...)}},
	}
	var res scheduling.Result
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res = scheduling.Solve(in)
	}
	b.StopTimer()
	if len(res.Unschedulable) != 0 {
		b.Fatalf("unschedulable: %v", res.Unschedulable)
	}
	held := 0
	for _, p := range res.NewNodeClaims {
		held += len(p.Reservations)
	}
	b.ReportMetric(float64(len(in.Pods))*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
	b.ReportMetric(float64(len(res.NewNodeClaims)), "nodeclaims")
	b.ReportMetric(float64(held), "reserved-places")
}
