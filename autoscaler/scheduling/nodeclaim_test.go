package scheduling_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/catalog"
)

// TestNodeClaimMinValuesRelaxedAnnotation: like Karpenter v1.13.0's
// scheduler (Scheduler.addToNewNodeClaim), every planned NodeClaim carries
// karpenter.sh/nodeclaim-min-values-relaxed, "true" when a minValues was
// lowered for it and "false" otherwise, whether or not the NodePool has
// minValues; the value overrides one the NodePool template sets.
func TestNodeClaimMinValuesRelaxedAnnotation(t *testing.T) {
	category := func(n int) karpv1.NodeSelectorRequirementWithMinValues {
		r := req(catalog.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r")
		r.MinValues = &n
		return r
	}
	onlyC := []*corev1.Pod{pod("only-c", "1", "1Gi", nodeSelector(catalog.LabelInstanceCategory, "c"))}
	tests := []struct {
		name      string
		minValues *int // on instance-category In [c m r]; nil: no minValues
		template  map[string]string
		policy    scheduling.MinValuesPolicy
		pods      []*corev1.Pod
		want      string // "" when no NodeClaim may be planned
	}{
		{name: "no minValues, Strict", policy: scheduling.MinValuesPolicyStrict, pods: pods(2, "p", "1", "1Gi"), want: "false"},
		{name: "no minValues, default policy", pods: pods(2, "p", "1", "1Gi"), want: "false"},
		{name: "no minValues, BestEffort", policy: scheduling.MinValuesPolicyBestEffort, pods: onlyC, want: "false"},
		{name: "minValues met, Strict", minValues: new(3), policy: scheduling.MinValuesPolicyStrict, pods: pods(2, "p", "1", "1Gi"), want: "false"},
		{name: "minValues met, BestEffort", minValues: new(3), policy: scheduling.MinValuesPolicyBestEffort, pods: pods(2, "p", "1", "1Gi"), want: "false"},
		{name: "minValues unmet, Strict: no NodeClaim", minValues: new(3), policy: scheduling.MinValuesPolicyStrict, pods: onlyC},
		{name: "minValues unmet, BestEffort: relaxed", minValues: new(3), policy: scheduling.MinValuesPolicyBestEffort, pods: onlyC, want: "true"},
		{name: "template says true, plan not relaxed", template: map[string]string{karpv1.NodeClaimMinValuesRelaxedAnnotationKey: "true"},
			pods: pods(1, "p", "1", "1Gi"), want: "false"},
		{name: "template says false, plan relaxed", minValues: new(2), template: map[string]string{karpv1.NodeClaimMinValuesRelaxedAnnotationKey: "false"},
			policy: scheduling.MinValuesPolicyBestEffort, pods: onlyC, want: "true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := generalPurpose()
			np.Spec.Template.Annotations = tt.template
			if tt.minValues != nil {
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, category(*tt.minValues))
			}
			res := solve(t, scheduling.Input{Pods: tt.pods, NodePools: []scheduling.NodePoolInput{pool(np)}, MinValuesPolicy: tt.policy})
			if tt.want == "" {
				if len(res.NewNodeClaims) != 0 || len(res.Unschedulable) != len(tt.pods) {
					t.Fatalf("%d NodeClaims, %d unschedulable; want none planned", len(res.NewNodeClaims), len(res.Unschedulable))
				}
				return
			}
			if len(res.NewNodeClaims) == 0 || len(res.Unschedulable) != 0 {
				t.Fatalf("%d NodeClaims, unschedulable %v; want every pod planned", len(res.NewNodeClaims), res.Unschedulable)
			}
			for _, p := range res.NewNodeClaims {
				got, ok := p.NodeClaim().Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey]
				if !ok || got != tt.want {
					t.Errorf("annotation %s = %q (set %t), want %q", karpv1.NodeClaimMinValuesRelaxedAnnotationKey, got, ok, tt.want)
				}
			}
		})
	}
}

// TestPlanAllowsOffering: the cheapest offering explain reports and
// consolidation prices is one the plan's zone and capacity-type
// requirements admit, whatever cheaper offerings the type has elsewhere.
func TestPlanAllowsOffering(t *testing.T) {
	it := &cloudprovider.InstanceType{Name: "m5.large", Offerings: []cloudprovider.Offering{
		{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeSpot, PriceUSDPerHour: 0.03, Available: true},
		{Zone: "us-east-1b", CapacityType: karpv1.CapacityTypeSpot, PriceUSDPerHour: 0.04, Available: true},
		{Zone: "us-east-1b", CapacityType: karpv1.CapacityTypeOnDemand, PriceUSDPerHour: 0.096, Available: true},
		{Zone: "us-east-1c", CapacityType: karpv1.CapacityTypeOnDemand, PriceUSDPerHour: 0.09, Available: true},
	}}
	for _, tt := range []struct {
		name     string
		reqs     []karpv1.NodeSelectorRequirementWithMinValues
		wantZone string
		wantCT   string
	}{
		{"unconstrained", nil, "us-east-1a", karpv1.CapacityTypeSpot},
		{"zone", []karpv1.NodeSelectorRequirementWithMinValues{req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1b", "us-east-1c")}, "us-east-1b", karpv1.CapacityTypeSpot},
		{"zone and capacity type", []karpv1.NodeSelectorRequirementWithMinValues{
			req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1b"),
			req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand),
		}, "us-east-1b", karpv1.CapacityTypeOnDemand},
		{"nothing allowed", []karpv1.NodeSelectorRequirementWithMinValues{req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "eu-west-1a")}, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plan := scheduling.NodeClaimPlan{Requirements: tt.reqs}
			o, ok := it.CheapestOffering(plan.AllowsOffering())
			if ok != (tt.wantZone != "") || o.Zone != tt.wantZone || o.CapacityType != tt.wantCT {
				t.Errorf("cheapest allowed offering %+v (found %t), want %s %s", o, ok, tt.wantZone, tt.wantCT)
			}
		})
	}
}

// TestNodeClaimOverlayAnnotations: like Karpenter v1.14.0's
// NodeClaimTemplate.ToNodeClaim, a NodeClaim whose candidate types have
// an offering a NodeOverlay priced carries
// karpenter.sh/price-overlay-applied, and one whose types got capacity
// from a NodeOverlay karpenter.sh/capacity-overlay-applied; neither
// otherwise.
func TestNodeClaimOverlayAnnotations(t *testing.T) {
	plain := &cloudprovider.InstanceType{Name: "m5.large", Offerings: []cloudprovider.Offering{{Zone: "a", CapacityType: "on-demand", PriceUSDPerHour: 0.096}}}
	priced := &cloudprovider.InstanceType{Name: "c5.large", Offerings: []cloudprovider.Offering{{Zone: "a", CapacityType: "on-demand", PriceUSDPerHour: 10, PriceOverlay: "dear"}}}
	fpga := &cloudprovider.InstanceType{Name: "m6i.large", CapacityOverlays: map[corev1.ResourceName]string{"example.com/fpga": "fpga"}}
	for _, tt := range []struct {
		name            string
		types           []*cloudprovider.InstanceType
		price, capacity bool
	}{
		{"no overlay", []*cloudprovider.InstanceType{plain}, false, false},
		{"a priced candidate", []*cloudprovider.InstanceType{plain, priced}, true, false},
		{"an overlaid capacity", []*cloudprovider.InstanceType{fpga, plain}, false, true},
		{"both", []*cloudprovider.InstanceType{priced, fpga}, true, true},
	} {
		nc := scheduling.NodeClaimPlan{NodePool: generalPurpose(), InstanceTypes: tt.types}.NodeClaim()
		_, price := nc.Annotations[v1alpha1.PriceOverlayAppliedAnnotationKey]
		_, capacity := nc.Annotations[v1alpha1.CapacityOverlayAppliedAnnotationKey]
		if price != tt.price || capacity != tt.capacity {
			t.Errorf("%s: annotations %v; want price-overlay-applied %v, capacity-overlay-applied %v", tt.name, nc.Annotations, tt.price, tt.capacity)
		}
	}
}

// TestNodeClaimCarriesTheTerminationFinalizer: a planned NodeClaim is
// created with karpenter.sh/termination, so its instance is terminated
// before it goes whenever it is deleted, with no patch to add the
// finalizer after the creation.
func TestNodeClaimCarriesTheTerminationFinalizer(t *testing.T) {
	nc := scheduling.NodeClaimPlan{NodePool: generalPurpose()}.NodeClaim()
	if len(nc.Finalizers) != 1 || nc.Finalizers[0] != karpv1.TerminationFinalizer {
		t.Errorf("finalizers %v, want [%s]", nc.Finalizers, karpv1.TerminationFinalizer)
	}
}
