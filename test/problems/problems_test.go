package problems

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpx/karpx/catalog"
	"github.com/karpx/karpx/ec2sim"
)

// TestSetupIsValidForTheSimulator: every piece of the shared setup is
// accepted by ec2sim as both sides use it: P1's throttling config, P2's
// fault rules, P4's behaviour tag and P1's never-join marker, and the
// instance types the scenarios name are in the catalogue.
func TestSetupIsValidForTheSimulator(t *testing.T) {
	cfg := ec2sim.Config{ClusterName: "problems", Logger: logr.Discard()}
	P1Sim(&cfg)
	if cfg.Throttle.Neighbours != P1Neighbours {
		t.Errorf("P1Sim set Neighbours %v, want %v", cfg.Throttle.Neighbours, P1Neighbours)
	}
	sim, err := ec2sim.New(cfg)
	if err != nil {
		t.Fatalf("ec2sim.New with P1's throttling: %v", err)
	}
	if err := sim.Faults().Add(P2Faults()...); err != nil {
		t.Errorf("P2Faults: %v", err)
	}
	sim.SetImageAllocatable(P3ImageAllocatable())
	b, err := ec2sim.ParseBehavior(P4Behavior)
	if err != nil {
		t.Fatalf("P4Behavior: %v", err)
	}
	if len(b.LateTaints) != 1 || b.LateTaints[0].Taint.Key != P4CiliumTaint || len(b.LateResources) != 1 || len(b.NotReadyWindows) != 1 {
		t.Errorf("P4Behavior parsed as %+v: want the Cilium taint, one late resource and one NotReady window", b)
	}
	if !strings.Contains(P1NeverJoinUserData, "# karpx-sim: never-join") {
		t.Error("P1NeverJoinUserData lacks ec2sim's never-join marker")
	}
	for _, it := range append([]string{P1InstanceType, P2InstanceType, P5InstanceType}, P3InstanceTypes...) {
		if _, ok := catalog.Get(it); !ok {
			t.Errorf("instance type %s is not in the catalogue", it)
		}
	}
	if P2Delay <= 0 || P2Failures <= 0 || P5ConsolidateAfter <= 0 || P1Window <= 0 || P3Reserve.Sign() <= 0 {
		t.Error("a scenario duration or quantity is not positive")
	}
}

// TestP3PodFitsTheEstimateNotTheRealNode: P3's pod fits m5.large's
// catalogue allocatable but not what is left after P3Reserve, so the
// scenario's first launch is undersized by construction.
func TestP3PodFitsTheEstimateNotTheRealNode(t *testing.T) {
	it, ok := catalog.Get(P3InstanceTypes[0])
	if !ok {
		t.Fatalf("%s not in the catalogue", P3InstanceTypes[0])
	}
	estimate := it.Allocatable.Memory().DeepCopy()
	real := estimate.DeepCopy()
	real.Sub(P3Reserve)
	offset := P3ImageAllocatable().Offset
	pod := offset.Memory().DeepCopy()
	pod.Neg()
	if pod.Cmp(P3Reserve) != 0 {
		t.Errorf("P3ImageAllocatable offsets memory by -%s, want -%s", pod.String(), P3Reserve.String())
	}
	mem := mustQuantity(t, P3PodMemory)
	if mem.Cmp(estimate) > 0 || mem.Cmp(real) <= 0 {
		t.Errorf("pod memory %s: want <= the estimate %s and > the real allocatable %s", mem.String(), estimate.String(), real.String())
	}
}

// TestLogfAppendsToTheScenarioLog: Logf appends "TEST: LINE" to the file
// ScenarioLogEnv names.
func TestLogfAppendsToTheScenarioLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scenarios.log")
	t.Setenv(ScenarioLogEnv, path)
	Logf(t, "scenario P%d: %s", 9, "figures")
	Logf(t, "second")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := t.Name() + ": scenario P9: figures\n" + t.Name() + ": second\n"
	if string(data) != want {
		t.Errorf("scenario log = %q, want %q", data, want)
	}
}

func mustQuantity(t *testing.T, s string) resource.Quantity {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
