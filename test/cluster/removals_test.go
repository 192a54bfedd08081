package cluster

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"
)

// The policy with removals logs pod deletions and evictions and Node
// writes by any user before the per-user rule, and still nothing else.
func TestAuditPolicyRemovals(t *testing.T) {
	var p auditv1.Policy
	if err := yaml.UnmarshalStrict([]byte(auditPolicy([]string{"u"}, true)), &p); err != nil {
		t.Fatal(err)
	}
	type rule struct {
		level     auditv1.Level
		users     []string
		verbs     []string
		resources []string
	}
	var got []rule
	for _, r := range p.Rules {
		var res []string
		for _, g := range r.Resources {
			res = append(res, g.Resources...)
		}
		got = append(got, rule{level: r.Level, users: r.Users, verbs: r.Verbs, resources: res})
	}
	want := []rule{
		{level: auditv1.LevelMetadata, verbs: []string{"delete", "deletecollection"}, resources: []string{"pods"}},
		{level: auditv1.LevelMetadata, verbs: []string{"create"}, resources: []string{"pods/eviction"}},
		{level: auditv1.LevelRequest, verbs: []string{"update", "patch"}, resources: []string{"nodes"}},
		{level: auditv1.LevelMetadata, users: []string{"u"}},
		{level: auditv1.LevelNone},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rules = %+v, want %+v", got, want)
	}
	// Without removals the policy is AuditPolicy's: the user, then none.
	if got, want := auditPolicy([]string{"u"}, false), AuditPolicy("u"); got != want {
		t.Errorf("auditPolicy without removals = %q, want AuditPolicy's %q", got, want)
	}
}

// Removals keeps completed pod deletions, evictions and Node writes (with
// the write's body), whoever made them, and leaves out other requests and
// stages.
func TestRemovals(t *testing.T) {
	const tte = "kube-controller-manager/v1.35.4 (linux/amd64) kubernetes/$Format/node-controller"
	log := `{"stage":"ResponseComplete","verb":"delete","user":{"username":"admin"},"userAgent":"` + tte + `","stageTimestamp":"2026-11-27T13:32:38.5Z","objectRef":{"resource":"pods","namespace":"default","name":"keep-1"},"responseStatus":{"code":200}}
{"stage":"ResponseStarted","verb":"delete","user":{"username":"admin"},"objectRef":{"resource":"pods","namespace":"default","name":"keep-1"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"create","user":{"username":"sa"},"userAgent":"karpx","stageTimestamp":"2026-11-27T13:32:39Z","objectRef":{"resource":"pods","subresource":"eviction","namespace":"default","name":"g-1"},"responseStatus":{"code":429}}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"admin"},"userAgent":"e2e","stageTimestamp":"2026-11-27T13:32:40Z","objectRef":{"resource":"nodes","name":"n1"},"requestObject":{"spec": {"taints": null}},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"get","user":{"username":"admin"},"objectRef":{"resource":"pods","namespace":"default","name":"keep-1"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"delete","user":{"username":"admin"},"objectRef":{"apiGroup":"karpenter.sh","resource":"nodeclaims","name":"c"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"get","user":{"username":"admin"},"responseStatus":{"code":200}}
`
	file := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(file, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Removals(file)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	want := []RemovalRecord{
		{Time: at("2026-11-27T13:32:38.5Z"), Verb: "delete", User: "admin", UserAgent: tte, Resource: "pods", Namespace: "default", Name: "keep-1", Code: 200},
		{Time: at("2026-11-27T13:32:39Z"), Verb: "create", User: "sa", UserAgent: "karpx", Resource: "pods/eviction", Namespace: "default", Name: "g-1", Code: 429},
		{Time: at("2026-11-27T13:32:40Z"), Verb: "patch", User: "admin", UserAgent: "e2e", Resource: "nodes", Name: "n1", Code: 200, Request: `{"spec":{"taints":null}}`},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Removals = %+v, want %+v", got, want)
	}
	line := got[0].String()
	for _, part := range []string{"13:32:38.500000", "200 delete pods default/keep-1", "/node-controller"} {
		if !strings.Contains(line, part) {
			t.Errorf("String() = %q, want it to contain %q", line, part)
		}
	}
	if _, err := Removals(filepath.Join(t.TempDir(), "missing.log")); err == nil {
		t.Error("Removals of a missing file: no error")
	}
}
