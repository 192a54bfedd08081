package e2e

import (
	"context"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpx/karpx/autoscaler/operator"
)

var (
	latencyWaves    = flag.Int("karpx.latency-waves", 0, "TestProvisioningLatency: waves of pending pods to create (0 skips the test; make bench-latency sets 10)")
	latencyWavePods = flag.Int("karpx.latency-wave-pods", 50, "TestProvisioningLatency: pods per wave")
	latencySingles  = flag.Int("karpx.latency-singles", 10, "TestProvisioningLatency: single pods created one at a time after the waves")
)

// latencyManifests is the latency test's NodePool (its EC2NodeClass
// "latency" is minimal): on-demand m5 nodes that are never consolidated.
var latencyManifests = nodePool{Name: "latency", Disruption: neverConsolidate,
	// Each wave selects its own value: its pods never fit the nodes of
	// an earlier wave, so every pod is planned onto a new NodeClaim.
	Requirements:  []string{"{key: karpx.dev/wave, operator: Exists}"},
	InstanceTypes: []string{"m5.large", "m5.xlarge", "m5.2xlarge"}, CapacityTypes: []string{onDemand}}.yaml()

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted samples.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func latencySummary(samples []float64) string {
	s := slices.Sorted(slices.Values(samples))
	return fmt.Sprintf("n=%d p50=%.2fs p99=%.2fs max=%.2fs", len(s), percentile(s, 50), percentile(s, 99), percentile(s, 100))
}

// TestProvisioningLatency measures provisioning latency on the real control
// plane with the simulator: waves of pending pods (each wave created at
// once, in parallel), then single pods one at a time, each wave waiting
// until every pod of the previous one was observed. The figure is the
// histogram karpx_provisioning_pod_to_launch_seconds's samples (pod first
// seen pending by the provisioner → the CreateFleet of its NodeClaim
// issued), with Karpenter's default batch window (1 s idle, 10 s at
// most). It prints p50/p99/max and asserts nothing about them (a
// benchmark): run by `make bench-latency`, skipped otherwise.
func TestProvisioningLatency(t *testing.T) {
	if *latencyWaves <= 0 {
		t.Skip("a benchmark: run with -karpx.latency-waves N (make bench-latency)")
	}
	var (
		mu      sync.Mutex
		samples []float64
	)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(samples) }
	defaults := operator.DefaultOptions()
	e := newEnvWith(t, "karpx-latency", envOptions{tweak: func(o *operator.Options) {
		o.BatchIdleDuration, o.BatchMaxDuration = defaults.BatchIdleDuration, defaults.BatchMaxDuration
		o.LaunchLatencyHook = func(s float64) { mu.Lock(); samples = append(samples, s); mu.Unlock() }
	}})
	e.apply(ec2NodeClassYAML("latency", e.name), latencyManifests)

	pod := func(wave, i int) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("wave-%d-%d", wave, i), Namespace: "default", Labels: map[string]string{"app": "latency"}},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"karpx.dev/wave": fmt.Sprint(wave)},
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
			},
		}
	}
	// run creates n pods of wave in parallel and waits until all are observed.
	run := func(wave, n int) []float64 {
		before := count()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				if err := e.kube.Create(e.ctx, pod(wave, i)); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("creating wave %d: %v", wave, err)
		}
		e.eventually(3*time.Minute, fmt.Sprintf("the %d pods of wave %d observed", n, wave), func(context.Context) (bool, error) {
			return count() >= before+n, nil
		})
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(samples[before:])
	}

	var waves, singles []float64
	for w := range *latencyWaves {
		got := run(w, *latencyWavePods)
		t.Logf("wave %d: %s", w, latencySummary(got))
		waves = append(waves, got...)
	}
	for s := range *latencySingles {
		singles = append(singles, run(*latencyWaves+s, 1)...)
	}
	window := fmt.Sprintf("batch window idle %s, max %s", defaults.BatchIdleDuration, defaults.BatchMaxDuration)
	lines := []string{
		fmt.Sprintf("provisioning latency (pod seen pending → CreateFleet issued), %s", window),
		fmt.Sprintf("  %d waves of %d pods: %s", *latencyWaves, *latencyWavePods, latencySummary(waves)),
	}
	if len(singles) > 0 {
		lines = append(lines, fmt.Sprintf("  %d single pods:      %s", len(singles), latencySummary(singles)))
	}
	scenarioLogf(t, "%s", strings.Join(lines, "\n"))
}
