package cmd

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/karpx/karpx/plugin/status"
	"github.com/karpx/karpx/test/cluster"
)

// upstreamObjects are what a cluster running upstream Karpenter holds: its
// CRDs' objects, with no karpx controller, Service or status from one.
const upstreamObjects = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  limits: {cpu: "100"}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: general-abcde
  labels: {karpenter.sh/nodepool: general}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements:
    - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
---
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
spec:
  nodeSelector: {kubernetes.io/arch: amd64}
  containers:
    - name: app
      image: registry.k8s.io/pause:3.10
      resources: {requests: {cpu: "1", memory: 1Gi}}
`

// TestUpstreamKarpenterCluster runs the plugin's commands against a real
// API server holding only the CRDs and objects (no karpx controller): each
// shows what the objects tell and names the part that is unavailable.
func TestUpstreamKarpenterCluster(t *testing.T) {
	c := cluster.StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRDs(ctx, filepath.Join(filepath.Dir(bin), "manifests", "crds")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, []byte(upstreamObjects), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, error) {
		t.Helper()
		streams, _, out, errOut := genericiooptions.NewTestIOStreams()
		root := NewCmdKarpx(streams)
		root.SetArgs(append(args, "--kubeconfig", c.Kubeconfig, "--cache-dir", filepath.Join(t.TempDir(), "cache")))
		err := root.ExecuteContext(ctx)
		return out.String(), errOut.String(), err
	}

	out, errOut, err := run("status")
	if err != nil {
		t.Fatalf("status: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "general") || !strings.Contains(out, "general-abcde") {
		t.Errorf("status lacks the NodePool or NodeClaim:\n%s", out)
	}
	if !strings.Contains(errOut, status.BudgetUnavailableMessage) {
		t.Errorf("status does not say the EC2 API budget is unavailable; stderr:\n%s", errOut)
	}

	_, errOut, err = run("throttle")
	if ExitCode(err) != ExitNegative || !strings.Contains(errOut, `service "karpx-controller" not found`) {
		t.Errorf("throttle: exit %d, stderr %q; want %d and the missing Service named", ExitCode(err), errOut, ExitNegative)
	}

	out, errOut, err = run("explain", "pod", "web", "-n", "default")
	if err != nil {
		t.Fatalf("explain: %v\n%s\n%s", err, out, errOut)
	}
	for _, s := range []string{"Pod default/web is pending", "yes (chosen)", "on-demand", "no status.subnets", "no EC2 access"} {
		if !strings.Contains(out, s) {
			t.Errorf("explain lacks %q:\n%s", s, out)
		}
	}

	out, _, err = run("version")
	if err != nil || !strings.Contains(out, "Server Version: v1.") {
		t.Errorf("version: %v\n%s", err, out)
	}

	t.Run("output formats", func(t *testing.T) { testOutputFormats(ctx, t, c, bin) })
}
