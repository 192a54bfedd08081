package operator

import (
	"flag"
	"strings"
	"testing"
)

// TestMinValuesPolicyOption: --min-values-policy defaults to Strict, as
// Karpenter's; MIN_VALUES_POLICY and the flag set it; anything but Strict
// or BestEffort is an error naming the flag.
func TestMinValuesPolicyOption(t *testing.T) {
	if got := DefaultOptions().MinValuesPolicy; got != "Strict" {
		t.Fatalf("default %q, want Strict", got)
	}
	t.Setenv("MIN_VALUES_POLICY", "BestEffort")
	if got := DefaultOptions().MinValuesPolicy; got != "BestEffort" {
		t.Fatalf("with MIN_VALUES_POLICY=BestEffort: %q", got)
	}
	var o Options
	fs := flag.NewFlagSet("karpx", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--cluster-name", "demo", "--min-values-policy", "Loose"}); err != nil {
		t.Fatal(err)
	}
	err := o.Validate()
	if err == nil || !strings.Contains(err.Error(), `--min-values-policy (MIN_VALUES_POLICY) "Loose": want Strict or BestEffort`) {
		t.Fatalf("Validate = %v, want an error naming --min-values-policy", err)
	}
	o.MinValuesPolicy = "Strict"
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate with Strict: %v", err)
	}
}

// TestInterruptionQueueOption: --interruption-queue is off (empty) by
// default, as Karpenter's settings.interruptionQueue; INTERRUPTION_QUEUE
// sets it; a URL or ARN instead of the name is an error naming the flag.
func TestInterruptionQueueOption(t *testing.T) {
	if got := DefaultOptions().InterruptionQueue; got != "" {
		t.Fatalf("default %q, want empty (off)", got)
	}
	t.Setenv("INTERRUPTION_QUEUE", "karpx-demo")
	if got := DefaultOptions().InterruptionQueue; got != "karpx-demo" {
		t.Fatalf("with INTERRUPTION_QUEUE=karpx-demo: %q", got)
	}
	for _, bad := range []string{"https://sqs.us-east-1.amazonaws.com/123456789012/karpx", "arn:aws:sqs:us-east-1:123456789012:karpx", "${INTERRUPTION_QUEUE}"} {
		o := DefaultOptions()
		o.ClusterName, o.InterruptionQueue = "demo", bad
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--interruption-queue (INTERRUPTION_QUEUE)") {
			t.Errorf("Validate with %q = %v, want an error naming --interruption-queue", bad, err)
		}
	}
	o := DefaultOptions()
	o.ClusterName, o.InterruptionQueue = "demo", "Karpenter-demo_queue.fifo"
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate with a valid name: %v", err)
	}
}

// TestFeatureGatesOption: --feature-gates reads Karpenter's format:
// SpotToSpotConsolidation off by default and set by the flag or
// FEATURE_GATES; Karpenter's own default value passes; a gate karpx does
// not implement set to true, an unknown gate and a value that is not a
// bool are errors naming the flag.
func TestFeatureGatesOption(t *testing.T) {
	o := DefaultOptions()
	o.ClusterName = "demo"
	if err := o.Validate(); err != nil || o.SpotToSpotConsolidation {
		t.Fatalf("default: Validate %v, SpotToSpotConsolidation %v; want off", err, o.SpotToSpotConsolidation)
	}
	t.Setenv("FEATURE_GATES", "SpotToSpotConsolidation=true")
	o = DefaultOptions()
	o.ClusterName = "demo"
	if err := o.Validate(); err != nil || !o.SpotToSpotConsolidation {
		t.Fatalf("FEATURE_GATES=SpotToSpotConsolidation=true: Validate %v, gate %v", err, o.SpotToSpotConsolidation)
	}
	for in, want := range map[string]string{
		// Karpenter v1.14's default (pkg/operator/options/options.go).
		"NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false": "ReservedCapacity=true: not supported by karpx yet",
		"NodeRepair=false,ReservedCapacity=false,SpotToSpotConsolidation=true,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false": "",
		"SpotToSpot=true":                "unknown gate",
		"SpotToSpotConsolidation=maybe":  "want Name=true or Name=false",
		" SpotToSpotConsolidation=true ": "",
	} {
		o.FeatureGates = in
		err := o.Validate()
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), "--feature-gates (FEATURE_GATES)") && strings.Contains(err.Error(), want)) ||
			(err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("--feature-gates %q: Validate = %v; want %q", in, err, want)
		}
	}
}
