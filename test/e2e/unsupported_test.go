package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnsupportedFieldDenied: a Karpenter v1 field karpx does not implement
// yet is never accepted and ignored. On the real API server with the
// running karpx-webhook, an EC2NodeClass with instanceStorePolicy RAID0
// and a NodePool with consolidationPolicy Balanced are denied, each naming
// its rule, the field and "not supported by karpx yet" (NodeOverlays,
// which KX203 denied, and static NodePools, which KX202 denied, are served
// since issue 33: test/e2e/nodeoverlay_test.go, static_test.go); the
// real kubectl plugin's
// `kubectl karpx lint` exits non-zero on the same manifests, naming them.
// Control: a shared Karpenter example that uses no listed field
// (general-purpose.yaml) is admitted by the same webhook, and lint exits 0
// on it.
func TestUnsupportedFieldDenied(t *testing.T) {
	runInParallel(t)
	e := newEnvWith(t, "karpx-unsupported", envOptions{noAutoscaler: true, ownControlPlane: true})
	e.startWebhook()
	path := buildPlugin(t, e.root)

	raid0 := strings.Replace(ec2NodeClassYAML("raid0", e.name), "spec:\n", "spec:\n  instanceStorePolicy: RAID0\n", 1)
	if !strings.Contains(raid0, "instanceStorePolicy: RAID0") {
		t.Fatalf("fixture lacks the field:\n%s", raid0)
	}
	balanced := nodePool{Name: "balanced", NodeClass: "raid0", CapacityTypes: []string{onDemand},
		Disruption: "{consolidationPolicy: Balanced, consolidateAfter: 0s}"}.yaml()
	if !strings.Contains(balanced, "consolidationPolicy: Balanced") {
		t.Fatalf("fixture lacks the field:\n%s", balanced)
	}
	for _, tc := range []struct{ name, manifest, webhook, want string }{
		{"EC2NodeClass instanceStorePolicy", raid0, "ec2nodeclasses.karpx.io", "KX201 spec.instanceStorePolicy: not supported by karpx yet"},
		{"NodePool consolidationPolicy Balanced", balanced, "nodepools.karpx.io", "KX202 spec.disruption.consolidationPolicy: Balanced not supported by karpx yet"},
	} {
		out, err := e.cluster.Kubectl(e.ctx, []byte(tc.manifest), "apply", "-f", "-")
		if err == nil || !strings.Contains(out, `admission webhook "`+tc.webhook+`" denied the request`) || !strings.Contains(out, tc.want) {
			t.Errorf("%s: kubectl apply: %v, want the webhook's denial naming %q:\n%s", tc.name, err, tc.want, out)
		}
		file := filepath.Join(t.TempDir(), "manifest.yaml")
		if err := os.WriteFile(file, []byte(tc.manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(e.ctx, "kubectl", "karpx", "lint", "-f", file)
		cmd.Env = append(cmd.Environ(), "PATH="+path)
		lint, err := cmd.CombinedOutput()
		if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() == 0 || !strings.Contains(string(lint), strings.SplitN(tc.want, ":", 2)[0]) || !strings.Contains(string(lint), "not supported by karpx yet") {
			t.Errorf("%s: kubectl karpx lint: %v, want a non-zero exit naming %q:\n%s", tc.name, err, tc.want, lint)
		}
	}

	// Control: the same webhook admits a Karpenter example that sets no
	// listed field, and lint passes it.
	e.applyExample("general-purpose.yaml")
	cmd := exec.CommandContext(e.ctx, "kubectl", "karpx", "lint", "-f", filepath.Join(e.root, "test", "testdata", "karpenter-examples", "general-purpose.yaml"))
	cmd.Env = append(cmd.Environ(), "PATH="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("control: kubectl karpx lint general-purpose.yaml: %v\n%s", err, out)
	}
}
