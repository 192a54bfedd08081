package cluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
)

// Permission is one RBAC grant or one request, as RBAC authorizes it: a
// verb ("get", "list", "watch", "create", "update", "patch", "delete",
// "deletecollection"), an API group ("" for core) and a resource with its
// subresource ("pods/eviction"). Namespace and resourceNames are left out:
// the check is about which kinds of access a component needs at all.
type Permission struct {
	Verb, Group, Resource string
}

// String returns "verb group/resource", e.g. "create /pods/eviction".
func (p Permission) String() string { return p.Verb + " " + p.Group + "/" + p.Resource }

// AuditPolicy returns a kube-apiserver audit policy (audit.k8s.io/v1) that
// logs, at the Metadata level (verb, user, object reference, response
// code; no bodies), every request of the given users, and nothing else.
func AuditPolicy(users ...string) string {
	return auditPolicy(users, false)
}

// removalRules are the audit policy rules of Options.AuditRemovals: pod
// deletions and evictions at the Metadata level, and writes to a Node
// object (its labels, taints, spec; not its status, which kwok writes
// every few seconds) at the Request level, whose body shows the taints
// set. By any user: kwokctl's binary runtime gives every component the
// same admin certificate, so the user agent (RemovalRecord.UserAgent) is
// what names the component: "kube-controller-manager/v1.35.4 (…)/" and the
// name of the client the controller was built with, e.g.
// "replicaset-controller"; kube-controller-manager v1.35's taint-eviction
// controller uses the "node-controller" client (its log line "Deleting
// pod" names it), and "pod-garbage-collector" force-deletes orphans.
const removalRules = `- level: Metadata
  verbs: ["delete", "deletecollection"]
  resources: [{group: "", resources: ["pods"]}]
- level: Metadata
  verbs: ["create"]
  resources: [{group: "", resources: ["pods/eviction"]}]
- level: Request
  verbs: ["update", "patch"]
  resources: [{group: "", resources: ["nodes"]}]
`

// auditPolicy is AuditPolicy for users, with removalRules first when
// removals is set. With no user and no removals it logs nothing.
func auditPolicy(users []string, removals bool) string {
	var rules strings.Builder
	if removals {
		rules.WriteString(removalRules)
	}
	if len(users) > 0 {
		quoted := make([]string, len(users))
		for i, u := range users {
			quoted[i] = fmt.Sprintf("%q", u)
		}
		fmt.Fprintf(&rules, "- level: Metadata\n  users: [%s]\n", strings.Join(quoted, ", "))
	}
	return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
` + rules.String() + `- level: None
`
}

// auditEvent is the part of an audit.k8s.io/v1 Event that UsedPermissions
// and Removals read.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent      string          `json:"userAgent"`
	StageTimestamp time.Time       `json:"stageTimestamp"`
	RequestObject  json.RawMessage `json:"requestObject"`
	ObjectRef      *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// UsedPermissions reads a kube-apiserver audit log (JSON lines) and returns
// the resource requests user made, with how often, and separately those
// the API server refused with 403 Forbidden. Non-resource requests
// (discovery, /version) are left out: RBAC's default roles grant them.
func UsedPermissions(auditLog, user string) (used, forbidden map[Permission]int, err error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	used, forbidden = map[Permission]int{}, map[Permission]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", auditLog, err)
		}
		// A watch is logged when its response starts (it completes only
		// when it ends); other requests when they complete.
		done := ev.Stage == "ResponseComplete" || ev.Stage == "Panic"
		if ev.Verb == "watch" {
			done = ev.Stage == "ResponseStarted"
		}
		if ev.User.Username != user || ev.ObjectRef == nil || !done {
			continue
		}
		p := Permission{Verb: ev.Verb, Group: ev.ObjectRef.APIGroup, Resource: ev.ObjectRef.Resource}
		if ev.ObjectRef.Subresource != "" {
			p.Resource += "/" + ev.ObjectRef.Subresource
		}
		if ev.ResponseStatus != nil && ev.ResponseStatus.Code == 403 {
			forbidden[p]++
		} else {
			used[p]++
		}
	}
	return used, forbidden, sc.Err()
}

// GrantedPermissions returns every Permission the Roles and ClusterRoles
// among objs (LoadRBAC's output) grant to ServiceAccount namespace/name
// through the RoleBindings and ClusterRoleBindings among objs. Wildcards
// are returned as written ("*"); the manifests test forbids them.
func GrantedPermissions(objs []runtime.Object, namespace, name string) map[Permission]bool {
	bound := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return (s.Kind == rbacv1.ServiceAccountKind && s.Namespace == namespace && s.Name == name) ||
				(s.Kind == rbacv1.UserKind && s.Name == serviceaccount.MakeUsername(namespace, name))
		})
	}
	out := map[Permission]bool{}
	eachBinding(objs, func(_ string, subjects []rbacv1.Subject, rules []rbacv1.PolicyRule) {
		if !bound(subjects) {
			return
		}
		for _, r := range rules {
			for _, v := range r.Verbs {
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						out[Permission{Verb: v, Group: g, Resource: res}] = true
					}
				}
			}
		}
	})
	return out
}

// CheckLeastPrivilege fails t for every permission granted but never used
// (unless allowed lists it, with the reason it is still needed) and for
// every request the API server refused as Forbidden. It also fails for an
// allowed entry that is not granted, so the allowlist cannot go stale (an
// allowed entry may be used on some runs: rare paths are why it exists). component names the manifests directory in
// messages.
func CheckLeastPrivilege(t testing.TB, component string, granted map[Permission]bool, used, forbidden map[Permission]int, allowed map[Permission]string) {
	t.Helper()
	if len(used) == 0 {
		t.Errorf("%s: the audit log holds no request of the ServiceAccount: is auditing on?", component)
		return
	}
	var unused, stale []string
	for p := range granted {
		// An informer lists before it watches; client-go's WatchListClient
		// streams that list through the watch instead when the server
		// supports it, and falls back to a list otherwise: a used watch
		// needs the list.
		if p.Verb == "list" && used[Permission{Verb: "watch", Group: p.Group, Resource: p.Resource}] > 0 {
			continue
		}
		// client-go's event recorder creates an event and patches it
		// (its count and lastTimestamp) when the same event repeats
		// within the correlator's window: whether a run repeats one
		// depends on its timing, so a used create needs the patch.
		if p.Verb == "patch" && p.Resource == "events" && used[Permission{Verb: "create", Group: p.Group, Resource: p.Resource}] > 0 {
			continue
		}
		if _, ok := allowed[p]; !ok && used[p] == 0 {
			unused = append(unused, p.String())
		}
	}
	for p := range allowed {
		if !granted[p] {
			stale = append(stale, p.String()+" (not granted)")
		}
	}
	var refused []string
	for p, n := range forbidden {
		refused = append(refused, fmt.Sprintf("%s (%d×)", p, n))
	}
	slices.Sort(unused)
	slices.Sort(stale)
	slices.Sort(refused)
	if len(unused) > 0 {
		t.Errorf("%s grants permissions the component never used (remove them, or allowlist with the reason): %s", component, strings.Join(unused, ", "))
	}
	if len(stale) > 0 {
		t.Errorf("%s: stale least-privilege allowlist entries: %s", component, strings.Join(stale, ", "))
	}
	if len(refused) > 0 {
		t.Errorf("%s lacks permissions the component used (403 Forbidden): %s", component, strings.Join(refused, ", "))
	}
	var lines []string
	for p, n := range used {
		lines = append(lines, fmt.Sprintf("%s %d×", p, n))
	}
	slices.Sort(lines)
	t.Logf("%s: permissions used (audit log): %s", component, strings.Join(lines, "; "))
}
