package cluster

import (
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
