package webhook_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestWebhookServiceAccountReadsOnlyItsSecret sends the real API server
// requests as ServiceAccount karpx-system/karpx-webhook (impersonated, with
// the groups its token carries, so that the refused probes stay out of the
// audit log that TestSelfSignedRotationUnderServiceAccount compares with
// the grants), under the RBAC of manifests/webhook, to learn what the
// webhook may do with Secrets: get, update and a
// watch selected by metadata.name on karpx-webhook-cert (what the rotator
// does, TestSelfSignedRotationUnderServiceAccount); no list, no watch of the
// namespace, no get or watch of another Secret. Control: with the Role
// cert-controller needed bound beside it (list and watch on every Secret of
// the namespace) the same client lists the other Secret, so the checks
// would catch the old grant.
func TestWebhookServiceAccountReadsOnlyItsSecret(t *testing.T) {
	requireSuite(t)
	ctx := context.Background()
	admin := suite.client
	saCfg := rest.CopyConfig(suite.cfg)
	saCfg.Impersonate = rest.ImpersonationConfig{UserName: webhookUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + testNamespace, "system:authenticated"}}
	sa, err := client.NewWithWatch(saCfg, client.Options{Scheme: admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "karpx-webhook-cert", Namespace: testNamespace}}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "karpx-controller-credentials", Namespace: testNamespace}, StringData: map[string]string{"token": "not for the webhook"}}
	for _, s := range []*corev1.Secret{own, other} {
		if err := admin.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), s) })
	}
	byName := func(name string) []client.ListOption {
		return []client.ListOption{client.InNamespace(testNamespace), client.MatchingFields{"metadata.name": name}}
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v, want allowed", what, err)
		}
	}
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
	watchErr := func(opts ...client.ListOption) error {
		w, err := sa.Watch(ctx, &corev1.SecretList{}, opts...)
		if err == nil {
			w.Stop()
		}
		return err
	}

	allowed("get own Secret", sa.Get(ctx, client.ObjectKeyFromObject(own), &corev1.Secret{}))
	allowed("watch own Secret by metadata.name", watchErr(byName(own.Name)...))
	cur := &corev1.Secret{}
	if err := sa.Get(ctx, client.ObjectKeyFromObject(own), cur); err == nil {
		allowed("update own Secret", sa.Update(ctx, cur))
	}
	forbidden("list Secrets of the namespace", sa.List(ctx, &corev1.SecretList{}, client.InNamespace(testNamespace)))
	forbidden("list own Secret by metadata.name", sa.List(ctx, &corev1.SecretList{}, byName(own.Name)...))
	forbidden("get another Secret", sa.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Secret{}))
	forbidden("watch Secrets of the namespace", watchErr(client.InNamespace(testNamespace)))
	forbidden("watch another Secret by metadata.name", watchErr(byName(other.Name)...))
	forbidden("update another Secret", sa.Update(ctx, other.DeepCopy()))

	// Control: cert-controller's grant, bound beside the chart's Role.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "karpx-webhook-cert-controller-control", Namespace: testNamespace},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: testNamespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "karpx-webhook", Namespace: testNamespace}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, o := range []client.Object{binding, role} {
			if err := admin.Delete(context.Background(), o); err != nil {
				t.Errorf("removing the control's grant: %v", err)
			}
		}
	}()
	eventuallyFor(t, 10*time.Second, "control: the old grant lets the webhook list the other Secret", func() error {
		list := &corev1.SecretList{}
		if err := sa.List(ctx, list, client.InNamespace(testNamespace)); err != nil {
			return err
		}
		for _, s := range list.Items {
			if s.Name == other.Name && string(s.Data["token"]) == "not for the webhook" {
				return nil
			}
		}
		return errorf("listed %d Secrets, not %s", len(list.Items), other.Name)
	})
}
