package cluster

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestKwokPodWorkers: a cluster started with Options.KwokPodWorkers and
// Options.KwokNodeWorkers hands kwok's controller (kwokctl's kwok.yaml, its
// --config) a KwokConfiguration with that many pod and Node workers and
// kwok v0.8.0's defaults (pkg/apis/config/v1alpha1/zz_generated.defaults.go)
// for every other option, and still runs a pod on a kwok Node
// (StartProbed's Probe).
func TestKwokPodWorkers(t *testing.T) {
	SkipWithoutControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := StartProbed(ctx, Options{Name: "karpx-kwok-workers", KwokPodWorkers: 32, KwokNodeWorkers: 16}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop() }()
	data, err := os.ReadFile(filepath.Join(c.workdir, "clusters", c.Name, "kwok.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var options map[string]any
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var d struct {
			Kind    string         `json:"kind"`
			Options map[string]any `json:"options"`
		}
		if err := yaml.Unmarshal(doc, &d); err != nil {
			t.Fatalf("kwok.yaml: %v", err)
		}
		if d.Kind == "KwokConfiguration" {
			options = d.Options
		}
	}
	if options == nil {
		t.Fatalf("kwok.yaml has no KwokConfiguration:\n%s", data)
	}
	want := map[string]any{
		"podPlayStageParallelism": 32.0, "nodePlayStageParallelism": 16.0,
		// kwok v0.8.0's defaults:
		"cidr": "10.0.0.0/24", "nodeLeaseParallelism": 4.0,
		"podsOnNodeSyncParallelism": 1.0, "enablePodsOnNodeSyncListPager": true,
		"enablePodsOnNodeSyncStreamWatch": false, "enableDebuggingHandlers": true,
		"enableProfilingHandler": true, "enableContentionProfiling": false,
	}
	for k, v := range want {
		if options[k] != v {
			t.Errorf("kwok's option %s = %v, want %v", k, options[k], v)
		}
	}
}

// Without KwokPodWorkers and KwokNodeWorkers the kwok controller gets no
// KwokConfiguration and keeps all of its defaults; with one of them, the
// other stays at kwok's default, 4.
func TestKwokDefaultsWithoutPodWorkers(t *testing.T) {
	if got := kwokConfig(kwokWorkers{}); got != "" {
		t.Fatalf("kwokConfig of no workers = %q, want none", got)
	}
	for _, tc := range []struct {
		workers    kwokWorkers
		pods, node string
	}{
		{kwokWorkers{nodes: 32}, "podPlayStageParallelism: 4\n", "nodePlayStageParallelism: 32\n"},
		{kwokWorkers{pods: 32}, "podPlayStageParallelism: 32\n", "nodePlayStageParallelism: 4\n"},
	} {
		got := kwokConfig(tc.workers)
		if !strings.Contains(got, tc.pods) || !strings.Contains(got, tc.node) {
			t.Errorf("kwokConfig(%+v) = %q, want %q and %q", tc.workers, got, tc.pods, tc.node)
		}
	}
}
