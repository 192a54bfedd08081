package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/karpx/karpx/test/cluster"
)

// unsafeNodeClass is what an upstream Karpenter cluster admits (no karpx
// webhook): userData that restarts kubelet from a delayed background job.
const unsafeNodeClass = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: bounce
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  userData: |
    #!/bin/bash
    UNIT=kubelet
    (sleep 90 && systemctl restart "$UNIT") &
`

// TestAuditUpstreamCluster runs the real `kubectl karpx audit`
// (bin/kubectl-karpx) against a real API server holding only Karpenter's
// CRDs and objects, as a cluster run by upstream Karpenter: the unsafe
// EC2NodeClass the API server admitted is reported with its rule, object
// and field, in every output format, with the documented exit statuses.
func TestAuditUpstreamCluster(t *testing.T) {
	c := cluster.StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "kubectl-karpx")); err != nil {
		t.Skip("bin/kubectl-karpx not built: run make build")
	}
	if err := c.InstallCRDs(ctx, filepath.Join(filepath.Dir(bin), "manifests", "crds")); err != nil {
		t.Fatal(err)
	}
	karpx := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, "kubectl", append([]string{"karpx", "audit"}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var ee *exec.ExitError
		code := 0
		switch {
		case errors.As(err, &ee):
			code = ee.ExitCode()
		case err != nil:
			t.Fatalf("kubectl karpx audit %v: %v", args, err)
		}
		return out.String(), errOut.String(), code
	}

	// Nothing to check yet: exit 2.
	if out, errOut, code := karpx(); code != 2 {
		t.Errorf("empty cluster: exit %d, want 2\n%s%s", code, out, errOut)
	}
	if _, err := c.Kubectl(ctx, []byte(upstreamObjects+"---\n"+unsafeNodeClass), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := karpx()
	if code != 1 {
		t.Errorf("table: exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"EC2NodeClass/bounce", "deny", "KX003", "spec.userData line 3", `systemctl restart kubelet`, "3 object(s) checked: 1 denial(s), 0 warning(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}

	out, _, code = karpx("-o", "sarif")
	var log struct {
		Version string
		Runs    []struct {
			Results []struct {
				RuleID    string
				Level     string
				Locations []struct {
					LogicalLocations []struct{ FullyQualifiedName string }
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &log); err != nil || code != 1 {
		t.Fatalf("-o sarif: exit %d, %v\n%s", code, err, out)
	}
	if log.Version != "2.1.0" || len(log.Runs) != 1 || len(log.Runs[0].Results) != 1 {
		t.Fatalf("-o sarif: want one run with one result:\n%s", out)
	}
	r := log.Runs[0].Results[0]
	if r.RuleID != "KX003" || r.Level != "error" || r.Locations[0].LogicalLocations[0].FullyQualifiedName != "ec2nodeclasses.karpenter.k8s.aws/bounce/spec.userData" {
		t.Errorf("-o sarif result %+v", r)
	}

	out, _, code = karpx("-o", "json")
	if code != 1 || !strings.Contains(out, `"kind": "AuditReport"`) || !strings.Contains(out, `"rule": "KX003"`) {
		t.Errorf("-o json: exit %d\n%s", code, out)
	}
	if out, errOut, code := karpx("--disable", "KX003"); code != 0 {
		t.Errorf("--disable KX003: exit %d, want 0\n%s%s", code, out, errOut)
	}
	if _, errOut, code := karpx("--fail-on", "error"); code != 2 || !strings.Contains(errOut, "--fail-on") {
		t.Errorf("--fail-on error: exit %d, want 2; stderr %q", code, errOut)
	}

	// RBAC: manifests/plugin/audit-rbac.yaml is all an auditor needs; an
	// identity without it is refused with the API server's Forbidden.
	rbac := filepath.Join(filepath.Dir(bin), "manifests", "plugin", "audit-rbac.yaml")
	if _, err := c.Kubectl(ctx, nil, "apply", "-f", rbac); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, nil, "create", "clusterrolebinding", "auditor-karpx-audit", "--clusterrole=karpx-audit", "--user=auditor"); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := karpx("--as", "auditor"); code != 1 || !strings.Contains(out, "EC2NodeClass/bounce") {
		t.Errorf("as auditor: exit %d, want 1 with the finding\n%s%s", code, out, errOut)
	}
	if _, errOut, code := karpx("--as", "stranger"); code != 1 || !strings.Contains(errOut, "forbidden") {
		t.Errorf("as stranger: exit %d, want 1 and Forbidden; stderr %q", code, errOut)
	}
}
