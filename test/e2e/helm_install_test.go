package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/karpx/karpx/test/cluster"
)

// TestHelmInstallUnderChartRBAC: the operator installs karpx-crd and karpx
// with Helm's SDK (admin kubeconfig, as the helm CLI), and karpx-controller
// and two karpx-webhook replicas then run under the ServiceAccounts the
// chart created, with nothing but the chart's RBAC: no RBAC from
// manifests/ is applied. Pods are provisioned through the simulator; any
// request the API server refuses as Forbidden fails the test, seen both in
// the processes' logs and in the API server's audit log of the two
// ServiceAccounts. An EC2NodeClass with unsafe userData is denied through
// the chart's webhook configuration.
func TestHelmInstallUnderChartRBAC(t *testing.T) {
	crd := loadChart(t, repoChartDir(t, "karpx-crd"))
	e := newEnvWith(t, "karpx-helm-rbac", envOptions{
		noAutoscaler: true,
		auditUsers:   []string{chartControllerUser, chartWebhookUser},
		crds:         installCRDChart(t, crd),
	})
	e.helmSystemNode()
	w := e.newChartWebhook()
	helm := newHelmClient(t, e.cluster, helmNamespace, w.renderer())
	rel := helm.install(e.ctx, "karpx", loadChart(t, e.chartDir("karpx")), helmValues(e.name))
	if w := helm.post.rewritten; w != 4 {
		t.Fatalf("post-renderer rewrote %d webhooks, want 4 (mutating startup-taints, validating ec2nodeclasses, nodepools and nodeoverlays)", w)
	}
	objects := strings.Count(rel.Manifest, "\nkind: ")
	w.start("karpx-webhook")
	w.start("karpx-webhook")
	kubeconfig := e.chartServiceAccountKubeconfig(helmNamespace, chartControllerSA)
	e.startController(kubeconfig, "helm-0", "--leader-elect=true")

	c := chaosWorkload(e)
	unsafe := webhookUnsafeNodeClass(e.name)
	if _, err := e.cluster.Kubectl(e.ctx, []byte(unsafe), "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), `admission webhook "ec2nodeclasses.karpx.io" denied the request`) {
		t.Errorf("the kubelet-restarting EC2NodeClass through the chart's webhook: %v, want a denial", err)
	}
	took := c.scale(3, 180*time.Second)
	f := c.settle()
	if f.leaked != 0 || f.duplicates != 0 || f.nodeClaimsLost != 0 || f.nodeClaims == 0 {
		t.Errorf("after provisioning 3 pods: %s, want NodeClaims and nothing leaked, duplicated or lost", f)
	}

	// The audit log: every request of the chart's ServiceAccounts, none
	// refused.
	var used []string
	for _, user := range []string{chartControllerUser, chartWebhookUser} {
		ok, forbidden, err := cluster.UsedPermissions(e.cluster.AuditLog(), user)
		if err != nil {
			t.Fatal(err)
		}
		if len(ok) == 0 {
			t.Errorf("the audit log holds no request of %s: is it running under the chart's ServiceAccount?", user)
		}
		for p, n := range forbidden {
			t.Errorf("%s: %s refused as Forbidden %d× (the chart's RBAC lacks it)", user, p, n)
		}
		total := 0
		for _, n := range ok {
			total += n
		}
		used = append(used, fmt.Sprintf("%s=%d requests/%d permissions/%d forbidden", user[strings.LastIndexByte(user, ':')+1:], total, len(ok), len(forbidden)))
	}
	slices.Sort(used)
	scenarioLogf(t, "helm install under chart RBAC: chart=%s objects=%d provisioned=3 in %s %s audit: %s",
		rel.Chart.Metadata.Version, objects, took.Round(100*time.Millisecond), f, strings.Join(used, " "))
}
