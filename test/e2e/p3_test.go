package e2e

// Problem P3 on karpx. This file keeps karpx's side only: karpx has no
// switch to plan with the estimate after Nodes reported their real
// allocatable (issue 29). The control, the same pod on the real Karpenter
// AWS provider against ec2sim, lives in test/upstream
// (TestUpstreamAWSP3-style tests).

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/catalog"
	"github.com/karpx/karpx/test/problems"
)

// p3Manifests: a Bottlerocket class (problems.P3AMIAlias resolves to 4
// AMIs: x86_64 and arm64, standard and NVIDIA) and a pool of
// problems.P3InstanceTypes (m5.large, the undersized one, or m5.xlarge).
func p3Manifests(cluster string) string {
	return manifests(nodeClass{Name: "bottlerocket", AMIAlias: problems.P3AMIAlias}.yaml(cluster),
		nodePool{Name: "default", NodeClass: "bottlerocket", InstanceTypes: problems.P3InstanceTypes, CapacityTypes: []string{onDemand},
			Requirements: []string{inRequirement("kubernetes.io/arch", "amd64")}}.yaml())
}

// p3Undersized is the undersized type, the first of
// problems.P3InstanceTypes: problems.P3PodMemory fits its catalogue
// allocatable (6903Mi) but not its real one under problems.P3Reserve
// (5879Mi).
var p3Undersized = problems.P3InstanceTypes[0]

type p3Observation struct {
	undersized int           // m5.large instances launched
	running    bool          // the pod ran
	took       time.Duration // pod created → Running (or the watch's end)
	capacity   string        // kubectl karpx capacity output
}

// p3Run creates one pod of problems.P3PodMemory and watches until it runs, at most
// 3 minutes.
func p3Run(t *testing.T) p3Observation {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	status := l.Addr().String()
	l.Close()
	e := newEnvWithLog(t, "karpx-p3", func(o *operator.Options) {
		o.StatusBindAddress = status
	}, nil)
	e.sim.SetImageAllocatable(problems.P3ImageAllocatable())
	e.apply(p3Manifests(e.name))
	if err := e.kube.Create(e.ctx, deployment("big", 1, problems.P3PodCPU, problems.P3PodMemory)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var obs p3Observation
	e.eventually(3*time.Minute, "the pod Running", func(ctx context.Context) (bool, error) {
		obs.undersized = 0
		for _, in := range e.sim.Instances() {
			if in.InstanceType == p3Undersized {
				obs.undersized++
			}
		}
		obs.running = countRunning(ctx, e.kube, "big") == 1
		return obs.running, nil
	})
	obs.took = time.Since(start)
	path := buildPlugin(t, e.root)
	obs.capacity = e.kubectlWithPath(path, "karpx", "capacity", "--endpoint", "http://"+status)
	t.Logf("kubectl karpx capacity:\n%s", obs.capacity)
	return obs
}

// p3RealMemory is m5.large's real allocatable memory under the simulator's
// Bottlerocket reservation.
func p3RealMemory(t *testing.T) resource.Quantity {
	it, ok := catalog.Get(p3Undersized)
	if !ok {
		t.Fatalf("%s not in the catalogue", p3Undersized)
	}
	m := it.Allocatable.Memory().DeepCopy()
	m.Sub(problems.P3Reserve)
	return m
}

// TestScenarioP3CapacityLearning: a pod that fits m5.large's estimate but
// not its real allocatable gets at most one undersized node; once that
// Node registers, its allocatable is learned for (m5.large, AMI), the next
// launch is an m5.xlarge and the pod runs; kubectl karpx capacity shows
// the observed value.
func TestScenarioP3CapacityLearning(t *testing.T) {
	obs := p3Run(t)
	if !obs.running {
		t.Fatal("the pod never ran")
	}
	if obs.undersized > 1 {
		t.Errorf("%d undersized %s launches, want at most 1", obs.undersized, p3Undersized)
	}
	real := p3RealMemory(t)
	want := fmt.Sprintf("6903Mi→%s", real.String())
	if !strings.Contains(obs.capacity, p3Undersized) || !strings.Contains(obs.capacity, want) {
		t.Errorf("kubectl karpx capacity does not show %s's observed memory %q:\n%s", p3Undersized, want, obs.capacity)
	}
	scenarioLogf(t, "scenario P3: %d undersized launch, pod Running %.1fs after creation; m5.large memory estimate 6903Mi, observed %s (learned)",
		obs.undersized, obs.took.Seconds(), real.String())
}
