package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/ec2sim"
)

// subnetZonesPool is a NodePool named after its class and labelled
// pool=<class>, allowing spot m5.large in every zone: the zone is left to
// the class's subnets and to price.
func subnetZonesPool(class string) string {
	return nodePool{Name: class, Labels: map[string]string{"pool": class}, InstanceTypes: []string{"m5.large"}, CapacityTypes: []string{"spot"}}.yaml()
}

// TestZonesFromNodeClassSubnets: on the real API server, an EC2NodeClass
// whose subnetSelectorTerms select one subnet (by its Name tag) resolves
// only that subnet in its status, and its NodeClaim, instance and Node are
// in that subnet's zone, although spot m5.large is cheapest in another
// zone. The control, a class selecting every subnet by the discovery tag,
// launches the same pod in the cheapest zone (the simulator's spot prices
// differ per zone and its fleet takes the cheapest pool).
func TestZonesFromNodeClassSubnets(t *testing.T) {
	e := newEnv(t, "karpx-zones")
	// Prices decide the control's zone; the single-subnet class gets the
	// dearest zone, so only its subnets can put it there.
	zones := e.sim.Config().Zones
	cheap, dear := zones[0], zones[0]
	for _, z := range zones {
		p, _ := ec2sim.SpotPrice("m5.large", z)
		if c, _ := ec2sim.SpotPrice("m5.large", cheap); p < c {
			cheap = z
		}
		if d, _ := ec2sim.SpotPrice("m5.large", dear); p > d {
			dear = z
		}
	}
	if cheap == dear {
		t.Fatalf("precondition: spot m5.large costs the same in every zone %v", zones)
	}
	var subnet ec2sim.Subnet
	for _, s := range e.sim.Config().Subnets {
		if s.Zone == dear {
			subnet = s
		}
	}
	oneClass := nodeClass{Name: "one", SubnetTags: map[string]string{"Name": e.name + "-private-" + dear}}.yaml(e.name)
	e.apply(ec2NodeClassYAML("all", e.name), oneClass, subnetZonesPool("all"), subnetZonesPool("one"))
	for _, class := range []string{"all", "one"} {
		d := deployment(class, 1, "500m", "512Mi")
		d.Spec.Template.Spec.NodeSelector = map[string]string{"pool": class}
		if err := e.kube.Create(e.ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually(90*time.Second, "both pods Running and their NodeClaims registered", func(ctx context.Context) (bool, error) {
		if countRunning(ctx, e.kube, "all") != 1 || countRunning(ctx, e.kube, "one") != 1 {
			return false, nil
		}
		var list karpv1.NodeClaimList
		if err := e.kube.List(ctx, &list); err != nil {
			return false, err
		}
		for _, nc := range list.Items {
			if nc.Status.NodeName == "" {
				return false, nil
			}
		}
		return len(list.Items) == 2, nil
	})

	var cls v1.EC2NodeClass
	if err := e.kube.Get(e.ctx, client.ObjectKey{Name: "one"}, &cls); err != nil {
		t.Fatal(err)
	}
	if len(cls.Status.Subnets) != 1 || cls.Status.Subnets[0].ID != subnet.ID || cls.Status.Subnets[0].Zone != dear {
		t.Errorf("EC2NodeClass one status.subnets %+v, want only %s in %s", cls.Status.Subnets, subnet.ID, dear)
	}
	got := map[string]string{}
	for _, class := range []string{"all", "one"} {
		zone, where := e.placement(class)
		got[class] = where
		want := cheap
		if class == "one" {
			want = dear
		}
		if zone != want {
			t.Errorf("NodePool %s: %s; want everything in %s", class, where, want)
		}
	}
	// The NodeClaim says where it may launch: the class's zone only.
	for _, nc := range e.nodeClaimsOf("one") {
		var zoneReq *karpv1.NodeSelectorRequirementWithMinValues
		for i, r := range nc.Spec.Requirements {
			if r.Key == corev1.LabelTopologyZone {
				zoneReq = &nc.Spec.Requirements[i]
			}
		}
		if zoneReq == nil || zoneReq.Operator != corev1.NodeSelectorOpIn || len(zoneReq.Values) != 1 || zoneReq.Values[0] != dear {
			t.Errorf("NodeClaim %s zone requirement %+v, want In [%s]", nc.Name, zoneReq, dear)
		}
	}
	var ofOne []string
	for _, in := range e.sim.Instances() {
		if in.Tags[karpv1.NodePoolLabelKey] == "one" {
			ofOne = append(ofOne, in.ID+" in "+in.SubnetID)
		}
	}
	if len(ofOne) != 1 || !strings.HasSuffix(ofOne[0], " in "+subnet.ID) {
		t.Errorf("instances of NodePool one %v, want one in subnet %s", ofOne, subnet.ID)
	}
	scenarioLogf(t, "scenario zones: spot m5.large cheapest in %s; class selecting every subnet: %s; class selecting %s only: %s", cheap, got["all"], subnet.ID, got["one"])
}

// placement returns the zone of NodePool pool's only NodeClaim when its
// zone label, its instance's zone and subnet, and its Node's zone label
// agree, or "" with a description of each.
func (e *env) placement(pool string) (zone, where string) {
	e.t.Helper()
	ncs := e.nodeClaimsOf(pool)
	if len(ncs) != 1 {
		return "", fmt.Sprintf("%d NodeClaims", len(ncs))
	}
	nc := ncs[0]
	id := nc.Status.ProviderID[strings.LastIndex(nc.Status.ProviderID, "/")+1:]
	var inst ec2sim.Instance
	for _, in := range e.sim.Instances() {
		if in.ID == id {
			inst = in
		}
	}
	var node corev1.Node
	if err := e.kube.Get(e.ctx, client.ObjectKey{Name: nc.Status.NodeName}, &node); err != nil {
		e.t.Fatalf("Node of NodeClaim %s: %v", nc.Name, err)
	}
	ncZone, nodeZone := nc.Labels[corev1.LabelTopologyZone], node.Labels[corev1.LabelTopologyZone]
	var subnetZone string
	for _, s := range e.sim.Config().Subnets {
		if s.ID == inst.SubnetID {
			subnetZone = s.Zone
		}
	}
	where = fmt.Sprintf("NodeClaim %s in %q, instance %s in %q (subnet %s in %q), Node %s in %q", nc.Name, ncZone, inst.ID, inst.Zone, inst.SubnetID, subnetZone, node.Name, nodeZone)
	if ncZone == "" || ncZone != inst.Zone || inst.Zone != subnetZone || inst.Zone != nodeZone {
		return "", where
	}
	return ncZone, where
}

// nodeClaimsOf lists the NodeClaims of NodePool pool.
func (e *env) nodeClaimsOf(pool string) []karpv1.NodeClaim {
	e.t.Helper()
	var list karpv1.NodeClaimList
	if err := e.kube.List(e.ctx, &list, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}
