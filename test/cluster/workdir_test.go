package cluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Start creates a Workdir that does not exist yet, parents included, as
// hack/demo's .demo/cluster: it writes its kwokctl configuration (and the
// audit policy) there before kwokctl runs. Before that, `make demo` on a
// fresh clone failed at once with "open .../.demo/cluster/
// karpx-demo-kwokctl.yaml: no such file or directory", while every test
// passed because each let Start create a temporary directory.
func TestStartCreatesAMissingWorkdir(t *testing.T) {
	dir := SkipWithoutControlPlane(t)
	workdir := filepath.Join(t.TempDir(), "not", "yet", "there")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Name: "karpx-workdir", Workdir: workdir, BinDir: dir,
		AuditUsers: []string{"system:serviceaccount:karpx:karpx"}})
	if err != nil {
		t.Fatalf("Start with a Workdir that does not exist: %v", err)
	}
	defer func() { _ = c.Stop() }()
	for _, f := range []string{c.Kubeconfig, filepath.Join(workdir, "karpx-workdir-kwokctl.yaml"),
		filepath.Join(workdir, "karpx-workdir-audit-policy.yaml")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("after Start: %v", err)
		}
	}
	if err := c.Probe(ctx); err != nil {
		t.Fatalf("cluster in a created Workdir does not work: %v", err)
	}
}
