package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// UsedPermissions reads each request once (watches when they start, the
// rest when they complete), keeps subresources, leaves out other users and
// non-resource requests, and sets Forbidden answers apart.
func TestUsedPermissions(t *testing.T) {
	const sa = "system:serviceaccount:karpx:karpx"
	log := `{"stage":"ResponseStarted","verb":"watch","user":{"username":"` + sa + `"},"objectRef":{"resource":"nodes"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"watch","user":{"username":"` + sa + `"},"objectRef":{"resource":"nodes"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"create","user":{"username":"` + sa + `"},"objectRef":{"resource":"pods","subresource":"eviction","namespace":"default","name":"p"},"responseStatus":{"code":201}}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"` + sa + `"},"objectRef":{"apiGroup":"karpenter.sh","resource":"nodeclaims","subresource":"status"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"` + sa + `"},"objectRef":{"apiGroup":"karpenter.sh","resource":"nodeclaims","subresource":"status"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"get","user":{"username":"` + sa + `"},"objectRef":{"resource":"secrets","namespace":"kube-system"},"responseStatus":{"code":403}}
{"stage":"ResponseComplete","verb":"get","user":{"username":"` + sa + `"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"delete","user":{"username":"admin"},"objectRef":{"resource":"nodes"},"responseStatus":{"code":200}}
`
	file := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(file, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	used, forbidden, err := UsedPermissions(file, sa)
	if err != nil {
		t.Fatal(err)
	}
	wantUsed := map[Permission]int{
		{Verb: "watch", Resource: "nodes"}:                                    1,
		{Verb: "create", Resource: "pods/eviction"}:                           1,
		{Verb: "patch", Group: "karpenter.sh", Resource: "nodeclaims/status"}: 2,
	}
	if !reflect.DeepEqual(used, wantUsed) {
		t.Errorf("used = %v, want %v", used, wantUsed)
	}
	if want := map[Permission]int{{Verb: "get", Resource: "secrets"}: 1}; !reflect.DeepEqual(forbidden, want) {
		t.Errorf("forbidden = %v, want %v", forbidden, want)
	}
}

// GrantedPermissions follows only the bindings of the ServiceAccount, to
// Roles and ClusterRoles, and expands verbs × groups × resources.
func TestGrantedPermissions(t *testing.T) {
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "karpx", Name: "karpx"}
	other := rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "viewers"}
	objs := []runtime.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cr"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "lease", Namespace: "karpx"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get"}}}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "proxy", Namespace: "karpx"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services/proxy"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cr"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "cr"}, Subjects: []rbacv1.Subject{sa}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "lease", Namespace: "karpx"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "lease"}, Subjects: []rbacv1.Subject{sa}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "proxy", Namespace: "karpx"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "proxy"}, Subjects: []rbacv1.Subject{other}},
	}
	want := map[Permission]bool{
		{Verb: "create", Resource: "events"}: true, {Verb: "patch", Resource: "events"}: true,
		{Verb: "create", Group: "events.k8s.io", Resource: "events"}: true, {Verb: "patch", Group: "events.k8s.io", Resource: "events"}: true,
		{Verb: "get", Group: "coordination.k8s.io", Resource: "leases"}: true,
	}
	if got := GrantedPermissions(objs, "karpx", "karpx"); !reflect.DeepEqual(got, want) {
		t.Errorf("granted = %v, want %v", got, want)
	}
}

// recordingTB records what CheckLeastPrivilege reports instead of failing
// the test that calls it.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Helper()             {}
func (r *recordingTB) Logf(string, ...any) {}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// A granted "patch events" counts as used when "create events" was used
// (the event recorder patches only a repeated event), and only then: a
// run without any event still names it unused.
func TestCheckLeastPrivilegeEventPatchFollowsCreate(t *testing.T) {
	create := Permission{Verb: "create", Resource: "events"}
	patch := Permission{Verb: "patch", Resource: "events"}
	get := Permission{Verb: "get", Resource: "nodes"}
	granted := map[Permission]bool{create: true, patch: true, get: true}
	for _, tc := range []struct {
		name string
		used map[Permission]int
		want []string
	}{
		{"event created, never repeated", map[Permission]int{create: 1, get: 1}, nil},
		{"no event at all", map[Permission]int{get: 1}, []string{
			`manifests/x grants permissions the component never used (remove them, or allowlist with the reason): create /events, patch /events`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recordingTB{TB: t}
			CheckLeastPrivilege(r, "manifests/x", granted, tc.used, nil, nil)
			if !reflect.DeepEqual(r.errors, tc.want) {
				t.Errorf("reported %q, want %q", r.errors, tc.want)
			}
		})
	}
}
