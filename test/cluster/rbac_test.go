package cluster

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// rbacObjects: a ClusterRole bound cluster-wide and a Role bound in its
// namespace, both to ServiceAccount karpx/karpx, and a binding to a
// group, which WaitForRBAC does not check.
func rbacObjects() []runtime.Object {
	sa := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "karpx", Name: "karpx"}}
	return []runtime.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "karpx"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"karpenter.sh"}, Resources: []string{"nodeclaims/status"}, Verbs: []string{"patch", "update"}},
			{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
		}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "karpx", Name: "karpx"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"karpx-leader"}, Verbs: []string{"get"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "karpx"}, Subjects: sa,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "karpx"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "karpx", Name: "karpx"}, Subjects: sa,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "karpx"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "group"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "ops"}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "karpx"}},
	}
}

// sarAuthorizer answers SubjectAccessReviews: denied until a review of
// the same attributes was asked deniedFirst times, then allowed.
type sarAuthorizer struct {
	mu          sync.Mutex
	deniedFirst int
	asked       map[string]int
}

func (a *sarAuthorizer) react(action k8stesting.Action) (bool, runtime.Object, error) {
	sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
	r := sar.Spec.ResourceAttributes
	key := strings.Join([]string{sar.Spec.User, r.Namespace, r.Verb, r.Group, r.Resource, r.Subresource, r.Name}, " ")
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked[key]++
	out := sar.DeepCopy()
	out.Status.Allowed = a.asked[key] > a.deniedFirst
	if !out.Status.Allowed {
		out.Status.Reason = "not yet"
	}
	return true, out, nil
}

// checkAskedEach fails t unless exactly the reviews of rbacObjects'
// two ServiceAccount bindings were asked, each times times (why says
// what the answers were).
func (a *sarAuthorizer) checkAskedEach(t *testing.T, times int, why string) {
	t.Helper()
	want := map[string]int{
		"system:serviceaccount:karpx:karpx  patch karpenter.sh nodeclaims status ":             times,
		"system:serviceaccount:karpx:karpx karpx get coordination.k8s.io leases  karpx-leader": times,
	}
	if len(a.asked) != len(want) {
		t.Errorf("asked %v, want %v", a.asked, want)
	}
	for k, n := range want {
		if a.asked[k] != n {
			t.Errorf("review %q asked %d times, want %d (%s)", k, a.asked[k], n, why)
		}
	}
}

func fakeAuthorizer(deniedFirst int, objs ...runtime.Object) (kubernetes.Interface, *sarAuthorizer) {
	cs := fake.NewClientset(objs...)
	a := &sarAuthorizer{deniedFirst: deniedFirst, asked: map[string]int{}}
	cs.PrependReactor("create", "subjectaccessreviews", a.react)
	return cs, a
}

// TestWaitForRBACAsksUntilEachBindingIsAllowed: one review per
// ServiceAccount binding's resource rule (a subresource split off, a
// resource name kept, the Role's namespace), each asked again until it
// is allowed; nonResourceURLs rules and group subjects are not asked.
func TestWaitForRBACAsksUntilEachBindingIsAllowed(t *testing.T) {
	cs, a := fakeAuthorizer(2)
	if err := WaitForRBAC(context.Background(), cs, rbacObjects()); err != nil {
		t.Fatal(err)
	}
	a.checkAskedEach(t, 3, "denied twice, then allowed")
}

// TestWaitForServiceAccountRBACReadsTheClustersBindings: the bindings
// already in the cluster that name the ServiceAccount are the ones
// asked about; a binding of another ServiceAccount is not.
func TestWaitForServiceAccountRBACReadsTheClustersBindings(t *testing.T) {
	other := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "karpx", Name: "other"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "karpx"}}
	cs, a := fakeAuthorizer(1, append(rbacObjects(), other)...)
	if err := waitForServiceAccountRBAC(context.Background(), cs, "karpx", "karpx"); err != nil {
		t.Fatal(err)
	}
	a.checkAskedEach(t, 2, "denied once, then allowed")
	// Control: a ServiceAccount no binding names is not asked about.
	cs, a = fakeAuthorizer(0, rbacObjects()...)
	if err := waitForServiceAccountRBAC(context.Background(), cs, "karpx", "nobody"); err != nil || len(a.asked) != 0 {
		t.Errorf("ServiceAccount karpx/nobody: err %v, asked %v; want nil and nothing asked", err, a.asked)
	}
}

// TestWaitForRBACNamesWhatIsRefused: a permission never allowed is an
// error naming the ServiceAccount, the verb and the resource once the
// context ends.
func TestWaitForRBACNamesWhatIsRefused(t *testing.T) {
	cs, _ := fakeAuthorizer(1 << 30)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := WaitForRBAC(ctx, cs, rbacObjects())
	if err == nil {
		t.Fatal("WaitForRBAC returned nil for a permission never allowed")
	}
	for _, want := range []string{"system:serviceaccount:karpx:karpx may not patch nodeclaims/status", `group "karpenter.sh"`, "not yet"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// TestApplyRBACInEffectOnReturn: on the real API server, the
// controller's ServiceAccount is never refused right after ApplyRBAC
// returns, over 5 rounds of creating its RBAC from manifests/controller
// and deleting it again (what every test on a shared control plane does:
// the reset between tests deletes the RBAC the last test created).
func TestApplyRBACInEffectOnReturn(t *testing.T) {
	c := StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := filepath.Join(filepath.Dir(c.bin), "manifests", "controller")
	objs, err := LoadRBAC(dir)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		if err := ApplyRBAC(ctx, c.RESTConfig, dir); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		cfg, err := ServiceAccountConfig(ctx, c.RESTConfig, "karpx", "karpx", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		sa, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// The controller's first requests: Nodes cluster-wide, its
		// leader-election Lease.
		if _, err := sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("round %d: listing Nodes as karpx/karpx right after ApplyRBAC: %v", round, err)
		}
		if _, err := sa.CoordinationV1().Leases("karpx").Get(ctx, "karpx-leader", metav1.GetOptions{}); apierrors.IsForbidden(err) {
			t.Errorf("round %d: reading a Lease as karpx/karpx right after ApplyRBAC: %v", round, err)
		}
		for _, o := range objs {
			var err error
			switch o := o.(type) {
			case *rbacv1.ClusterRole:
				err = admin.RbacV1().ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{})
			case *rbacv1.ClusterRoleBinding:
				err = admin.RbacV1().ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{})
			case *rbacv1.Role:
				err = admin.RbacV1().Roles(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
			case *rbacv1.RoleBinding:
				err = admin.RbacV1().RoleBindings(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
			}
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
	}
}
