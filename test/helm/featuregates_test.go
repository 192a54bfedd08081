package helm

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/charts"
)

// controllerEnv returns the value of the controller container's
// environment variable name, and whether it is set.
func controllerEnv(t *testing.T, d *unstructured.Unstructured, name string) (string, bool) {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		t.Fatalf("%s has no containers", key(d))
	}
	for _, e := range asSlice(cs[0].(map[string]any)["env"]) {
		m := e.(map[string]any)
		if m["name"] == name {
			v, _ := m["value"].(string)
			return v, true
		}
	}
	return "", false
}

// TestChartFeatureGates: settings.featureGates (Karpenter's chart's names)
// becomes the controller's FEATURE_GATES, which the controller's own
// option parsing accepts with the gates as set: all off by default, node
// repair on when nodeRepair is true, static capacity when staticCapacity
// is, reserved capacity when reservedCapacity is. A gate karpx does not
// implement set to true is refused by the schema, naming the value, rather
// than reaching the controller.
func TestChartFeatureGates(t *testing.T) {
	for _, tc := range []struct {
		values                       string
		spotToSpot, repair, reserved bool
	}{
		{"{}", false, false, false},
		{"settings: {featureGates: {nodeRepair: true}}", false, true, false},
		{"settings: {featureGates: {spotToSpotConsolidation: true, reservedCapacity: false}}", true, false, false},
		{"settings: {featureGates: {reservedCapacity: true}}", false, false, true},
		{"settings: {featureGates: {staticCapacity: true}}", false, false, false},
	} {
		objs := render(t, "karpx", "karpx", valuesOf(t, tc.values))
		gates, ok := controllerEnv(t, objs["Deployment karpx/karpx-controller"], "FEATURE_GATES")
		if !ok {
			t.Fatalf("%s: the controller has no FEATURE_GATES", tc.values)
		}
		t.Setenv("FEATURE_GATES", gates)
		o := operator.DefaultOptions()
		o.ClusterName, o.Region = "demo", "us-east-1"
		if err := o.Validate(); err != nil {
			t.Fatalf("%s: FEATURE_GATES=%q: %v", tc.values, gates, err)
		}
		if want := strings.Contains(tc.values, "staticCapacity: true"); o.StaticCapacity != want {
			t.Errorf("%s: FEATURE_GATES=%q gives StaticCapacity=%v, want %v", tc.values, gates, o.StaticCapacity, want)
		}
		if o.SpotToSpotConsolidation != tc.spotToSpot || o.NodeRepair != tc.repair || o.ReservedCapacity != tc.reserved {
			t.Errorf("%s: FEATURE_GATES=%q gives SpotToSpotConsolidation=%v NodeRepair=%v ReservedCapacity=%v, want %v %v %v",
				tc.values, gates, o.SpotToSpotConsolidation, o.NodeRepair, o.ReservedCapacity, tc.spotToSpot, tc.repair, tc.reserved)
		}
	}
	_, err := charts.Render(loadChart(t, "karpx"), "karpx", "karpx", valuesOf(t, "settings: {featureGates: {capacityBuffer: true}}"))
	if err == nil || !strings.Contains(err.Error(), "/settings/featureGates/capacityBuffer") {
		t.Errorf("capacityBuffer: true: error %v, want a schema error naming /settings/featureGates/capacityBuffer", err)
	}
}
