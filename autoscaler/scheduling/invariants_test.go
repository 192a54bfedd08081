package scheduling_test

import (
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/scheduling"
)

// checkInvariants verifies what must hold for any Solve result, with
// Kubernetes' own matchers rather than the package's:
//
//   - every input pod is in exactly one of plans, placements, unschedulable;
//   - every plan has 1..MaxInstanceTypes types, cheapest first, each of
//     which fits the plan's Requests in its Allocatable and has an
//     available offering satisfying every requirement of the plan;
//   - the instance-type requirement lists exactly InstanceTypes, in order;
//   - PriceUSDPerHour is the cheapest such offering of InstanceTypes[0];
//   - the kube-scheduler would accept every placed pod on its node
//     (checkKubeScheduler).
func checkInvariants(t *testing.T, in scheduling.Input, res scheduling.Result) {
	t.Helper()
	seen := map[types.UID]int{}
	for _, p := range res.NewNodeClaims {
		for _, pod := range p.Pods {
			seen[pod.UID]++
		}
	}
	for _, ps := range res.ExistingPlacements {
		for _, pod := range ps {
			seen[pod.UID]++
		}
	}
	for uid := range res.Unschedulable {
		seen[uid]++
	}
	for _, pod := range in.Pods {
		if seen[pod.UID] != 1 {
			t.Errorf("pod %s appears %d times in the result, want 1", pod.Name, seen[pod.UID])
		}
	}
	if len(seen) != len(in.Pods) {
		t.Errorf("result mentions %d pods, input has %d", len(seen), len(in.Pods))
	}

	for n, p := range res.NewNodeClaims {
		if len(p.InstanceTypes) == 0 || len(p.InstanceTypes) > scheduling.MaxInstanceTypes {
			t.Fatalf("plan %d has %d instance types, want 1..%d", n, len(p.InstanceTypes), scheduling.MaxInstanceTypes)
		}
		var itReq []string
		for _, r := range p.Requirements {
			if r.Key == corev1.LabelInstanceTypeStable {
				itReq = r.Values
			}
		}
		if len(itReq) != len(p.InstanceTypes) {
			t.Errorf("plan %d: instance-type requirement has %d values, InstanceTypes %d", n, len(itReq), len(p.InstanceTypes))
		}
		prev := -1.0
		for i, it := range p.InstanceTypes {
			if i < len(itReq) && itReq[i] != it.Name {
				t.Errorf("plan %d: instance-type requirement[%d] = %s, InstanceTypes[%d] = %s", n, i, itReq[i], i, it.Name)
			}
			for name, want := range p.Requests {
				if have := it.Allocatable[name]; have.Cmp(want) < 0 {
					t.Errorf("plan %d: %s allocatable %s=%s < requests %s", n, it.Name, name, have.String(), want.String())
				}
			}
			price := cheapestMatching(t, p, it)
			if math.IsInf(price, 1) {
				t.Errorf("plan %d: %s has no available offering satisfying the plan's requirements", n, it.Name)
			}
			if price < prev {
				t.Errorf("plan %d: %s (%.4f) listed after a type costing %.4f", n, it.Name, price, prev)
			}
			prev = price
			if i == 0 && price != p.PriceUSDPerHour {
				t.Errorf("plan %d: PriceUSDPerHour %.4f, cheapest offering of %s is %.4f", n, p.PriceUSDPerHour, it.Name, price)
			}
		}
	}
	checkKubeScheduler(t, in, res)
}

// labelsFor returns the labels a node of type it launched for plan p with
// offering o would carry.
func labelsFor(p scheduling.NodeClaimPlan, it *cloudprovider.InstanceType, o cloudprovider.Offering) map[string]string {
	labels := map[string]string{}
	for k, v := range it.Labels {
		labels[k] = v
	}
	labels[corev1.LabelTopologyZone] = o.Zone
	labels[karpv1.CapacityTypeLabelKey] = o.CapacityType
	for k, v := range p.NodeClaim().Labels {
		labels[k] = v
	}
	// Kubelet and the cloud provider also set the deprecated aliases.
	for alias, stable := range karpv1.NormalizedLabels {
		if v, ok := labels[stable]; ok {
			labels[alias] = v
		}
	}
	return labels
}

// cheapestMatching returns the price of the cheapest available offering of
// it whose node labels satisfy every requirement of p, or +Inf.
func cheapestMatching(t *testing.T, p scheduling.NodeClaimPlan, it *cloudprovider.InstanceType) float64 {
	t.Helper()
	term := corev1.NodeSelectorTerm{}
	for _, r := range p.Requirements {
		term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values})
	}
	sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}})
	if err != nil {
		t.Fatalf("plan requirements are not a valid node selector: %v", err)
	}
	best := math.Inf(1)
	for _, o := range it.Offerings {
		if o.Available && sel.Match(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(p, it, o)}}) && o.PriceUSDPerHour < best {
			best = o.PriceUSDPerHour
		}
	}
	return best
}

// nodeFor returns the node plan p gets if launched as type it with its
// cheapest matching offering.
func nodeFor(p scheduling.NodeClaimPlan, it *cloudprovider.InstanceType) *corev1.Node {
	price := math.Inf(1)
	var best cloudprovider.Offering
	for _, o := range it.Offerings {
		if o.Available && o.PriceUSDPerHour < price {
			if z := valuesOf(p, corev1.LabelTopologyZone); !contains(z, o.Zone) {
				continue
			}
			if c := valuesOf(p, karpv1.CapacityTypeLabelKey); !contains(c, o.CapacityType) {
				continue
			}
			price, best = o.PriceUSDPerHour, o
		}
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new", Labels: labelsFor(p, it, best)}}
}

// valuesOf returns the values of the In requirement on key in p.
func valuesOf(p scheduling.NodeClaimPlan, key string) []string {
	for _, r := range p.Requirements {
		if r.Key == key && r.Operator == corev1.NodeSelectorOpIn {
			return r.Values
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
