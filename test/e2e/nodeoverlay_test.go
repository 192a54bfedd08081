package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/ec2sim"
)

// The two instance types of the price scenario: by EC2's (the catalogue's)
// on-demand prices c5.large ($0.085/h) is cheaper than m5.large
// ($0.096/h), so a NodePool allowing both launches c5.large.
const (
	overlayCheap = "c5.large"
	overlayDear  = "m5.large"
)

// overlayYAML is a NodeOverlay named name with weight, selecting
// instanceType, with spec lines (price, priceAdjustment, capacity) as
// YAML.
func overlayYAML(name string, weight int, spec string, requirements ...string) string {
	s := fmt.Sprintf("apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: %s}\nspec:\n  weight: %d\n%s", name, weight, spec)
	if len(requirements) > 0 {
		s += "  requirements:\n"
		for _, r := range requirements {
			s += "    - " + r + "\n"
		}
	}
	return s
}

// overlayCondition returns the ValidationSucceeded condition of the
// NodeOverlay named name, or nil.
func (e *env) overlayCondition(ctx context.Context, name string) (*metav1.Condition, error) {
	var o v1alpha1.NodeOverlay
	if err := e.kube.Get(ctx, client.ObjectKey{Name: name}, &o); err != nil {
		return nil, err
	}
	for _, c := range o.Status.Conditions {
		if c.Type == v1alpha1.ConditionTypeValidationSucceeded {
			mc := metav1.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
			return &mc, nil
		}
	}
	return nil, nil
}

// priceScenario applies a NodePool allowing overlayCheap and overlayDear
// on-demand, a NodeOverlay (weight 10) pricing overlayCheap at $10/h, and
// one of the same weight pricing it at $0.001/h, which conflicts with the
// first (equal weights, evaluated after it by name); then starts one pod
// and returns the instance type of the NodeClaim launched for it.
func priceScenario(t *testing.T, e *env) string {
	pool := nodePool{Name: "overlay", Labels: map[string]string{"overlay": "yes"}, InstanceTypes: []string{overlayCheap, overlayDear},
		CapacityTypes: []string{onDemand}, Disruption: neverConsolidate}
	e.apply(ec2NodeClassYAML("overlay", e.name), pool.yaml(),
		overlayYAML("make-cheap-dear", 10, "  price: \"10\"\n", inRequirement(corev1.LabelInstanceTypeStable, overlayCheap)),
		overlayYAML("a-cheaper-still", 10, "  price: \"0.001\"\n", inRequirement(corev1.LabelInstanceTypeStable, overlayCheap)))
	web := deployment("web", 1, "500m", "256Mi")
	web.Spec.Template.Spec.NodeSelector = map[string]string{"overlay": "yes"}
	if err := e.kube.Create(e.ctx, web); err != nil {
		t.Fatal(err)
	}
	e.eventually(120*time.Second, "web Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "web") == 1, nil
	})
	nc := e.onlyNodeClaim()
	return nc.Labels[corev1.LabelInstanceTypeStable]
}

// TestNodeOverlayPrice: with the NodeOverlay gate, a NodeOverlay that
// prices the normally cheaper type at $10/h makes karpx launch the other
// type, and the NodeClaim carries Karpenter's
// karpenter.sh/price-overlay-applied annotation; the overlay of the same
// weight that would make it cheaper still gets ValidationSucceeded=False
// with Karpenter's reason Conflict and applies nowhere, while the first
// gets ValidationSucceeded=True.
func TestNodeOverlayPrice(t *testing.T) {
	runInParallel(t)
	e := newEnvWithLog(t, "karpx-overlay-price", func(o *operator.Options) { o.FeatureGates = "NodeOverlay=true" }, nil)
	got := priceScenario(t, e)
	if got != overlayDear {
		t.Errorf("launched %s; want %s (NodeOverlay make-cheap-dear prices %s at $10/h)", got, overlayDear, overlayCheap)
	}
	if nc := e.onlyNodeClaim(); nc.Annotations[v1alpha1.PriceOverlayAppliedAnnotationKey] != "true" {
		t.Errorf("NodeClaim %s annotations %v; want %s: \"true\"", nc.Name, nc.Annotations, v1alpha1.PriceOverlayAppliedAnnotationKey)
	}
	e.eventually(60*time.Second, "make-cheap-dear ValidationSucceeded=True, a-cheaper-still False with reason Conflict", func(ctx context.Context) (bool, error) {
		ok, err := e.overlayCondition(ctx, "make-cheap-dear")
		if err != nil || ok == nil {
			return false, err
		}
		bad, err := e.overlayCondition(ctx, "a-cheaper-still")
		if err != nil || bad == nil {
			return false, err
		}
		// Evaluated before the NodePool existed, both were True: wait
		// for the evaluation with it.
		t.Logf("make-cheap-dear %s/%s, a-cheaper-still %s/%s: %s", ok.Status, ok.Reason, bad.Status, bad.Reason, bad.Message)
		return ok.Status == metav1.ConditionTrue && bad.Status == metav1.ConditionFalse && bad.Reason == "Conflict", nil
	})
}

// TestNodeOverlayPriceGateOff is the control: the same NodeOverlays
// without the gate (Karpenter's default) are not applied, so the
// catalogue's cheaper type is launched and no overlay gets a condition.
func TestNodeOverlayPriceGateOff(t *testing.T) {
	runInParallel(t)
	e := newEnvWithLog(t, "karpx-overlay-price-off", nil, nil)
	if got := priceScenario(t, e); got != overlayCheap {
		t.Errorf("launched %s; want %s (no overlay applied without the gate)", got, overlayCheap)
	}
	for _, name := range []string{"make-cheap-dear", "a-cheaper-still"} {
		if c, err := e.overlayCondition(e.ctx, name); err != nil || c != nil {
			t.Errorf("NodeOverlay %s: condition %+v, %v; want none without the gate", name, c, err)
		}
	}
}

// overlayFPGA is the extended resource of the capacity scenario.
const overlayFPGA = corev1.ResourceName("example.com/fpga")

// capacityScenario applies an EC2NodeClass whose nodes advertise two
// example.com/fpga (the emulated kubelet's device plugin), a NodePool of
// m5.large, and a NodeOverlay adding example.com/fpga: 2 to the pool's
// instance types; then starts a pod requesting one.
func capacityScenario(t *testing.T, e *env) {
	class := nodeClass{Name: "fpga", Tags: map[string]string{ec2sim.BehaviorTagKey: "allocatable=" + string(overlayFPGA) + ":2"}}
	pool := nodePool{Name: "fpga", Labels: map[string]string{"fpga": "yes"}, InstanceTypes: []string{overlayDear}, CapacityTypes: []string{onDemand}, Disruption: neverConsolidate}
	e.apply(class.yaml(e.name), pool.yaml(),
		overlayYAML("fpga", 1, "  capacity: {"+string(overlayFPGA)+": \"2\"}\n", inRequirement(karpv1.NodePoolLabelKey, "fpga")))
	job := deployment("fpga", 1, "500m", "256Mi")
	job.Spec.Template.Spec.NodeSelector = map[string]string{"fpga": "yes"}
	c := &job.Spec.Template.Spec.Containers[0]
	c.Resources.Requests[overlayFPGA] = resource.MustParse("1")
	c.Resources.Limits = corev1.ResourceList{overlayFPGA: resource.MustParse("1")}
	if err := e.kube.Create(e.ctx, job); err != nil {
		t.Fatal(err)
	}
}

// TestNodeOverlayCapacity: with the gate, a NodeOverlay adding
// example.com/fpga to the NodePool's instance types lets karpx launch a
// node for a pod requesting one, and the pod runs there; the NodeClaim
// reports the overlaid capacity and carries
// karpenter.sh/capacity-overlay-applied.
func TestNodeOverlayCapacity(t *testing.T) {
	runInParallel(t)
	e := newEnvWithLog(t, "karpx-overlay-capacity", func(o *operator.Options) { o.FeatureGates = "NodeOverlay=true" }, nil)
	capacityScenario(t, e)
	e.eventually(120*time.Second, "the fpga pod Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "fpga") == 1, nil
	})
	nc := e.onlyNodeClaim()
	if q := nc.Status.Allocatable[overlayFPGA]; q.String() != "2" || nc.Annotations[v1alpha1.CapacityOverlayAppliedAnnotationKey] != "true" {
		t.Errorf("NodeClaim %s: allocatable %s %s, annotations %v; want 2 and %s", nc.Name, overlayFPGA, q.String(), nc.Annotations, v1alpha1.CapacityOverlayAppliedAnnotationKey)
	}
}

// TestNodeOverlayCapacityGateOff is the control: without the gate no
// instance type has example.com/fpga, so no node is launched and the pod
// stays pending.
func TestNodeOverlayCapacityGateOff(t *testing.T) {
	runInParallel(t)
	e := newEnvWithLog(t, "karpx-overlay-capacity-off", nil, nil)
	capacityScenario(t, e)
	time.Sleep(30 * time.Second)
	if n := len(e.nodeClaims()); n != 0 || countRunning(e.ctx, e.kube, "fpga") != 0 {
		t.Errorf("%d NodeClaims, fpga running %d; want none without the overlay", n, countRunning(e.ctx, e.kube, "fpga"))
	}
}

// consolidationScenario launches a c5.large (EC2's cheaper type) for one
// pod in a NodePool allowing c5.large and m5.large on-demand with
// consolidation on, then applies the NodeOverlay pricing c5.large at
// $10/h, and returns the first NodeClaim.
func consolidationScenario(t *testing.T, e *env) karpv1.NodeClaim {
	pool := nodePool{Name: "overlay", Labels: map[string]string{"overlay": "yes"}, InstanceTypes: []string{overlayCheap, overlayDear},
		CapacityTypes: []string{onDemand}, Disruption: "{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}"}
	e.apply(ec2NodeClassYAML("overlay", e.name), pool.yaml())
	web := deployment("web", 1, "500m", "256Mi")
	web.Spec.Template.Spec.NodeSelector = map[string]string{"overlay": "yes"}
	if err := e.kube.Create(e.ctx, web); err != nil {
		t.Fatal(err)
	}
	e.eventually(120*time.Second, "web Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "web") == 1, nil
	})
	old := e.onlyNodeClaim()
	if got := old.Labels[corev1.LabelInstanceTypeStable]; got != overlayCheap {
		t.Fatalf("first node is %s; want %s (no overlay yet)", got, overlayCheap)
	}
	e.apply(overlayYAML("make-cheap-dear", 10, "  price: \"10\"\n", inRequirement(corev1.LabelInstanceTypeStable, overlayCheap)))
	return old
}

// TestNodeOverlayConsolidation: consolidation prices nodes through the
// NodeOverlays too. Once an overlay prices the running c5.large at $10/h,
// karpx replaces it by an m5.large ($0.096/h) and the pod runs there.
func TestNodeOverlayConsolidation(t *testing.T) {
	runInParallel(t)
	e := newEnvWithLog(t, "karpx-overlay-consolidation", func(o *operator.Options) { o.FeatureGates = "NodeOverlay=true" }, nil)
	old := consolidationScenario(t, e)
	e.eventually(180*time.Second, "the c5.large replaced by an m5.large, web Running", func(ctx context.Context) (bool, error) {
		if !e.nodeClaimGone(ctx, old.Name) || countRunning(ctx, e.kube, "web") != 1 {
			return false, nil
		}
		claims := e.nodeClaims()
		return len(claims) == 1 && claims[0].Labels[corev1.LabelInstanceTypeStable] == overlayDear, nil
	})
}

// TestNodeOverlayConsolidationGateOff is the control: without the gate
// the overlay changes nothing, and the c5.large, already the cheapest,
// stays.
func TestNodeOverlayConsolidationGateOff(t *testing.T) {
	runInParallel(t)
	e := newEnvWithLog(t, "karpx-overlay-consolidation-off", nil, nil)
	old := consolidationScenario(t, e)
	time.Sleep(30 * time.Second)
	if e.nodeClaimGone(e.ctx, old.Name) || len(e.nodeClaims()) != 1 {
		t.Fatalf("the c5.large was replaced (%d NodeClaims) without the gate", len(e.nodeClaims()))
	}
}
