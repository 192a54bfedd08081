package cloudprovider

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/scheduling"
)

// cheapest returns the cheapest available offering of it.
func cheapest(it *cloudprovider.InstanceType) cloudprovider.Offering {
	var best cloudprovider.Offering
	for _, o := range it.Offerings {
		if o.Available && (best.Zone == "" || o.PriceUSDPerHour < best.PriceUSDPerHour) {
			best = o
		}
	}
	return best
}

// plan solves one 1-vCPU pod on a NodePool that allows every zone and
// both capacity types, with the instance types of class.
func plan(t *testing.T, e *simEnv, class string) scheduling.NodeClaimPlan {
	t.Helper()
	np := nodePool(class)
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		in(karpv1.CapacityTypeLabelKey, cloudprovider.CapacityTypeSpot, cloudprovider.CapacityTypeOnDemand),
		in(corev1.LabelTopologyZone, "us-east-1a", "us-east-1b", "us-east-1c"),
		in("karpenter.k8s.aws/instance-family", "m5", "c5", "r5"),
	}
	its, err := e.cp.GetInstanceTypes(context.Background(), np)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	out := scheduling.Solve(scheduling.Input{Pods: []*corev1.Pod{pod}, NodePools: []scheduling.NodePoolInput{{NodePool: np, InstanceTypes: its}}})
	if len(out.NewNodeClaims) != 1 {
		t.Fatalf("planned %d NodeClaims (unschedulable: %v), want 1", len(out.NewNodeClaims), out.Unschedulable)
	}
	return out.NewNodeClaims[0]
}

// TestZonesComeFromTheClassSubnets: an EC2NodeClass whose
// subnetSelectorTerms select one subnet offers only that subnet's zone, so
// a NodePool allowing every zone gets NodeClaims, and instances, only
// there, even though the same instance types are cheaper in another zone.
// The control is the class selecting the subnets of all three zones.
func TestZonesComeFromTheClassSubnets(t *testing.T) {
	// One class per zone, selecting that zone's subnet by its Name tag.
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	classes := []*v1.EC2NodeClass{defaultNodeClass()}
	for _, z := range zones {
		c := defaultNodeClass()
		c.Name = "only-" + z
		c.Spec.SubnetSelectorTerms = []v1.SubnetSelectorTerm{{Tags: map[string]string{"Name": cluster + "-private-" + z}}}
		classes = append(classes, c)
	}
	e := newSimEnv(t, classes...)

	// Control: with every subnet, the cheapest offering decides the zone.
	wide := plan(t, e, classes[0].Name)
	cheapZone := cheapest(wide.InstanceTypes[0]).Zone
	zone := zones[0]
	if zone == cheapZone {
		zone = zones[1]
	}
	var subnetID string
	for _, s := range e.sim.Config().Subnets {
		if s.Zone == zone {
			subnetID = s.ID
		}
	}
	one := "only-" + zone

	its, err := e.cp.GetInstanceTypes(context.Background(), nodePool(one))
	if err != nil {
		t.Fatal(err)
	}
	cheaperElsewhere := false
	for _, it := range its {
		for _, o := range it.Offerings {
			if o.Zone != zone {
				t.Fatalf("%s offers %s %s in %s; the class's only subnet %s is in %s", it.Name, o.CapacityType, o.Zone, o.Zone, subnetID, zone)
			}
		}
		if w := find(wide.InstanceTypes, it.Name); w != nil && it.Name == wide.InstanceTypes[0].Name {
			cheaperElsewhere = cheapest(w).PriceUSDPerHour < cheapest(it).PriceUSDPerHour
		}
	}
	if !cheaperElsewhere {
		t.Fatalf("precondition: %s should be cheaper in %s than in %s", wide.InstanceTypes[0].Name, cheapZone, zone)
	}

	narrow := plan(t, e, one)
	for _, r := range narrow.Requirements {
		if r.Key == corev1.LabelTopologyZone && (r.Operator != corev1.NodeSelectorOpIn || len(r.Values) != 1 || r.Values[0] != zone) {
			t.Errorf("NodeClaim zone requirement %+v, want In [%s]", r, zone)
		}
	}
	nc := narrow.NodeClaim()
	nc.Name = "one-zone-abcde"
	got, err := e.cp.Create(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	if z := got.Labels[corev1.LabelTopologyZone]; z != zone {
		t.Errorf("launched in %s, want %s (the class's only subnet)", z, zone)
	}
	for _, inst := range e.sim.Instances() {
		if inst.Zone != zone || inst.SubnetID != subnetID {
			t.Errorf("instance %s in %s / %s, want %s / %s", inst.ID, inst.Zone, inst.SubnetID, zone, subnetID)
		}
	}
}
