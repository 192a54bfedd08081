package cluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// RemovalRecord is one request that Options.AuditRemovals logs: a pod
// deletion or eviction, or a write to a Node object, as kube-apiserver
// completed it.
type RemovalRecord struct {
	// Time is when the API server completed the request (its
	// stageTimestamp).
	Time time.Time
	// Verb is "delete", "deletecollection", "create" (an eviction),
	// "update" or "patch" (a Node).
	Verb string
	// User is the authenticated user; UserAgent the client's User-Agent,
	// which names the component when every component shares one user.
	User, UserAgent string
	// Resource is "pods", "pods/eviction" or "nodes"; Namespace and Name
	// the object's (Name is empty for a deletecollection).
	Resource, Namespace, Name string
	// Code is the HTTP response code (200/201 done, 404 gone already,
	// 429 an eviction a PodDisruptionBudget refused).
	Code int
	// Request is the request body of a Node write (a JSON patch or the
	// Node), compacted; empty for pods.
	Request string
}

// String formats r as one line: time, code, verb, resource, object, user
// agent, and a Node write's body.
func (r RemovalRecord) String() string {
	obj := r.Name
	if r.Namespace != "" {
		obj = r.Namespace + "/" + r.Name
	}
	s := fmt.Sprintf("%s %d %s %s %s user=%q agent=%q", r.Time.UTC().Format("15:04:05.000000"), r.Code, r.Verb, r.Resource, obj, r.User, r.UserAgent)
	if r.Request != "" {
		s += " body=" + r.Request
	}
	return s
}

// maxRecordRequest bounds RemovalRecord.Request (bytes): a Node update
// carries the whole Node, of which the head (metadata, spec.taints) is
// what a reader needs.
const maxRecordRequest = 2 << 10

// Removals reads a kube-apiserver audit log (JSON lines) of a cluster
// started with Options.AuditRemovals and returns its pod deletions and
// evictions and its Node writes, completed ones only, in log order. It
// returns the open or read error, or a line that is not an audit event.
func Removals(auditLog string) ([]RemovalRecord, error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []RemovalRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("%s: %w", auditLog, err)
		}
		if ev.Stage != "ResponseComplete" || ev.ObjectRef == nil || ev.ObjectRef.APIGroup != "" {
			continue
		}
		r := RemovalRecord{Time: ev.StageTimestamp, Verb: ev.Verb, User: ev.User.Username, UserAgent: ev.UserAgent,
			Resource: ev.ObjectRef.Resource, Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name}
		if ev.ObjectRef.Subresource != "" {
			r.Resource += "/" + ev.ObjectRef.Subresource
		}
		switch {
		case r.Resource == "pods" && (r.Verb == "delete" || r.Verb == "deletecollection"),
			r.Resource == "pods/eviction" && r.Verb == "create":
		case r.Resource == "nodes" && (r.Verb == "update" || r.Verb == "patch"):
			var body bytes.Buffer
			if len(ev.RequestObject) > 0 && json.Compact(&body, ev.RequestObject) == nil {
				r.Request = body.String()
				if len(r.Request) > maxRecordRequest {
					r.Request = r.Request[:maxRecordRequest] + "…"
				}
			}
		default:
			continue
		}
		if ev.ResponseStatus != nil {
			r.Code = ev.ResponseStatus.Code
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// formatRemovals is records one per line (RemovalRecord.String).
func formatRemovals(records []RemovalRecord) string {
	var b strings.Builder
	for _, r := range records {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}
