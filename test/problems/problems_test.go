package problems

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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

// TestP4NudgePendingUpdatesOnlyPendingPods: P4NudgePending annotates each
// pending pod of the app in every round (the last round's number stays)
// and leaves scheduled pods and other apps' pods alone.
func TestP4NudgePendingUpdatesOnlyPendingPods(t *testing.T) {
	pod := func(name, app, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{NodeName: node}}
	}
	c := fake.NewClientBuilder().WithObjects(pod("pending", "cuda", ""), pod("placed", "cuda", "node-1"), pod("other", "web", "")).Build()
	if err := P4NudgePending(context.Background(), c, "cuda"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pending": strconv.Itoa(P4NudgeRounds - 1), "placed": "", "other": ""}
	for name, v := range want {
		var p corev1.Pod
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		if got := p.Annotations[P4NudgeAnnotation]; got != v {
			t.Errorf("pod %s: annotation %s = %q, want %q", name, P4NudgeAnnotation, got, v)
		}
	}
}

// TestP4NudgePendingStopsWithItsContext: a cancelled context ends the
// wait between rounds with the context's error.
func TestP4NudgePendingStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := fake.NewClientBuilder().Build()
	if err := P4NudgePending(ctx, c, "cuda"); !errors.Is(err, context.Canceled) {
		t.Errorf("P4NudgePending with a cancelled context = %v, want context.Canceled", err)
	}
}
