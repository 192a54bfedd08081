package webhook_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// agentDaemonSet is a DaemonSet in namespace labelled like an agent (k=v).
func agentDaemonSet(name, namespace, k, v string) *appsv1.DaemonSet {
	labels := map[string]string{k: v}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent"}}},
			},
		},
	}
}

// A tenant who may edit only their own namespace creates a DaemonSet
// labelled like Cilium's agent there: no NodePool gets Cilium's NoExecute
// startup taint (with no agent to remove it, no new node would initialise).
// Detection reads only the startup-taint namespaces (kube-system here).
// Ordering makes the absence meaningful: an EBS CSI node DaemonSet created
// in kube-system after the tenant's is detected first (its taint appears),
// and only then is Cilium's checked absent; the webhook's old cluster-wide
// informer delivered the earlier tenant DaemonSet before it. The control:
// the same DaemonSet in kube-system, by an administrator, adds the taint.
func TestTenantDaemonSetAddsNoStartupTaint(t *testing.T) {
	requireSuite(t)
	ctx := context.Background()
	const tenantNS, tenant = "tenant-a", "tenant-a-user"
	if err := suite.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// A Role of the tenant's namespace (envtest runs no controller manager
	// to aggregate the "edit" ClusterRole's rules).
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant-workloads", Namespace: tenantNS},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"*"}}}}
	if err := suite.client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-workloads", Namespace: tenantNS},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant-workloads"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tenant}}}
	if err := suite.client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tenantCfg := rest.CopyConfig(suite.cfg)
	tenantCfg.Impersonate = rest.ImpersonationConfig{UserName: tenant, Groups: []string{"system:authenticated"}}
	tenantClient, err := client.New(tenantCfg, client.Options{Scheme: suite.client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// The tenant's rights are the namespace's alone.
	if err := tenantClient.Create(ctx, agentDaemonSet("cilium", "kube-system", "k8s-app", "cilium")); !apierrors.IsForbidden(err) {
		t.Fatalf("tenant creating a DaemonSet in kube-system: %v, want Forbidden", err)
	}
	forged := agentDaemonSet("cilium", tenantNS, "k8s-app", "cilium")
	eventually(t, "tenant's RoleBinding in effect", func() error { return tenantClient.Create(ctx, forged) })
	t.Cleanup(func() { _ = suite.client.Delete(ctx, forged) })

	ebs := agentDaemonSet("ebs-csi-node", "kube-system", "app", "ebs-csi-node")
	if err := suite.client.Create(ctx, ebs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.client.Delete(ctx, ebs) })
	taints := func() (string, error) {
		out, stderr, err := kubectl(t, nodePoolYAML("tenant-probe", ""), "apply", "--dry-run=server", "-f", "-", "-o", "jsonpath={.spec.template.spec.startupTaints[*].key}")
		if err != nil {
			return "", fmt.Errorf("%v: %s", err, stderr)
		}
		return out, nil
	}
	eventually(t, "EBS CSI node DaemonSet in kube-system detected", func() error {
		out, err := taints()
		if err == nil && !strings.Contains(out, "ebs.csi.aws.com/agent-not-ready") {
			err = fmt.Errorf("not yet injected: %q", out)
		}
		return err
	})
	out, err := taints()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "node.cilium.io/agent-not-ready") {
		t.Fatalf("a tenant's DaemonSet in %s put Cilium's startup taint on NodePools: %q", tenantNS, out)
	}

	// Control: the same agent in kube-system is detected.
	withCilium(t)
}
