package disruption_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/controllers/disruption"
)

// spotCloud serves 20 types s00..s19, each like m5.large but sold only as
// spot in us-east-1a, s00 the cheapest.
type spotCloud struct{ fakeCloud }

func spotTypes() []*cloudprovider.InstanceType {
	var out []*cloudprovider.InstanceType
	for i := range 20 {
		name := fmt.Sprintf("s%02d", i)
		out = append(out, &cloudprovider.InstanceType{Name: name,
			Labels:   map[string]string{corev1.LabelInstanceTypeStable: name, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
			Capacity: m5large.Capacity, Allocatable: m5large.Allocatable,
			Offerings: []cloudprovider.Offering{{Zone: "us-east-1a", CapacityType: "spot", PriceUSDPerHour: 0.01 * float64(i+1), Available: true}}})
	}
	return out
}

func (spotCloud) GetInstanceTypes(context.Context, *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return spotTypes(), nil
}

// TestSpotToSpotConsolidation: a spot node is replaced by a spot node
// only as Karpenter v1.14 does it (computeSpotToSpotConsolidation): behind
// the SpotToSpotConsolidation gate, with at least 15 cheaper spot types,
// launching from the 15 cheapest; otherwise the node stays with an
// Unconsolidatable event carrying Karpenter's message. The control is the
// old rule, which replaced it by any cheaper spot type.
func TestSpotToSpotConsolidation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gate    bool
		running string
		want    string // "" replaced; else the Unconsolidatable message
	}{
		{name: "gate off", running: "s19", want: "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"},
		{name: "19 cheaper types", gate: true, running: "s19"},
		{name: "10 cheaper types", gate: true, running: "s10",
			want: "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to consolidate, got 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			c.cloud = spotCloud{}
			c.opts.SpotToSpotConsolidation = tc.gate
			c.pool("p", karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, 0, "100%")
			c.objs[len(c.objs)-1].(*karpv1.NodePool).Spec.Template.Spec.Requirements = nil
			n := c.node("n", "p", 3600e9, nil)
			nc := c.objs[len(c.objs)-2].(*karpv1.NodeClaim)
			// A UID of its own per run: events are deduplicated per
			// NodeClaim across passes (and -count runs).
			nc.UID = types.UID(fmt.Sprintf("s2s-%d", runs.Add(1)))
			node := c.objs[len(c.objs)-1].(*corev1.Node)
			for _, l := range []map[string]string{nc.Labels, node.Labels} {
				l[corev1.LabelInstanceTypeStable] = tc.running
				l[karpv1.CapacityTypeLabelKey] = karpv1.CapacityTypeSpot
			}
			c.pod("web", n, "500m", nil)
			res := c.pass()
			var list karpv1.NodeClaimList
			if err := c.kube.List(context.Background(), &list); err != nil {
				t.Fatal(err)
			}
			var events []string
			for len(c.recorder.Events) > 0 {
				events = append(events, <-c.recorder.Events)
			}
			if tc.want != "" {
				if len(res.Decisions) != 0 || len(list.Items) != 1 {
					t.Fatalf("decisions %v, %d NodeClaims; want the node left alone", res.Decisions, len(list.Items))
				}
				if want := "Normal Unconsolidatable " + tc.want; !contains(events, want) {
					t.Fatalf("events %q; want %q", events, want)
				}
				return
			}
			if len(res.Decisions) != 1 || len(list.Items) != 2 {
				t.Fatalf("decisions %v, %d NodeClaims; want one replacement", res.Decisions, len(list.Items))
			}
			for _, rep := range list.Items {
				if rep.Name == "n" {
					continue
				}
				for _, r := range rep.Spec.Requirements {
					switch r.Key {
					case corev1.LabelInstanceTypeStable:
						if len(r.Values) != disruption.MinInstanceTypesForSpotToSpot || r.Values[0] != "s00" || r.Values[14] != "s14" {
							t.Errorf("replacement's instance types %v; want the 15 cheapest, s00..s14", r.Values)
						}
					case karpv1.CapacityTypeLabelKey:
						if strings.Join(r.Values, ",") != karpv1.CapacityTypeSpot {
							t.Errorf("replacement's capacity types %v; want spot", r.Values)
						}
					}
				}
			}
			if err := c.kube.Get(context.Background(), client.ObjectKey{Name: "n"}, &karpv1.NodeClaim{}); err != nil {
				t.Fatalf("the spot node is gone before its replacement is Initialized: %v", err)
			}
		})
	}
}

// runs numbers the NodeClaims the spot-to-spot tests create.
var runs atomic.Int64

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
