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
