package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/operator"
)

// ec2Call is one EC2 Query call the autoscaler made: its Action and the
// instance ids it named (InstanceId.N).
type ec2Call struct {
	action string
	ids    []string
}

// ec2Recorder is a reverse proxy between the autoscaler and the simulator
// that records every EC2 Query call (form-encoded POST) with the instance
// ids it names, as CloudTrail records a call's request parameters; the
// simulator's own Counts has no parameters, and a DescribeInstances by
// filter (garbage collection's List, every pass) is not about one
// instance. Calls of other protocols (SSM, SQS JSON) pass unrecorded.
type ec2Recorder struct {
	mu    sync.Mutex
	calls []ec2Call
}

// startEC2Recorder starts the proxy to target (the simulator's endpoint)
// and returns its URL; it stops when the test ends.
func startEC2Recorder(t *testing.T, target string) (*ec2Recorder, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rec := &ec2Recorder{}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host // the host the SDK signed
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if form, err := url.ParseQuery(string(body)); err == nil && form.Get("Action") != "" {
				call := ec2Call{action: form.Get("Action")}
				for k, v := range form {
					if strings.HasPrefix(k, "InstanceId.") {
						call.ids = append(call.ids, v...)
					}
				}
				rec.mu.Lock()
				rec.calls = append(rec.calls, call)
				rec.mu.Unlock()
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

// naming returns how many calls of action named instance id, and how many
// calls of action there were in all.
func (r *ec2Recorder) naming(action, id string) (named, all int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.calls {
		if c.action != action {
			continue
		}
		all++
		for _, got := range c.ids {
			if got == id {
				named++
				break
			}
		}
	}
	return named, all
}

// deletionCallsManifest: one NodePool that never consolidates, so only the
// test's deletions remove nodes.
var deletionCallsManifest = nodePool{Name: "delcalls", Disruption: neverConsolidate, Labels: map[string]string{"delcalls": "yes"},
	InstanceTypes: []string{"m5.large"}, CapacityTypes: []string{onDemand}}.yaml()

// TestDeletionCallsEC2Once deletes a node twice over, once by its NodeClaim
// and once by its Node (kubectl delete node), each with a pod to drain,
// and counts the EC2 calls that name the node's instance, from the
// deletion until the NodeClaim and Node are gone and 3 s more: exactly one
// TerminateInstances per deleted node and at most one DescribeInstances
// naming its instance in its whole life: the deletion's (the Node's
// termination issues it; the NodeClaim's finalizer sees
// InstanceTerminating and calls nothing). The drift check reads the
// subnet and security groups that the launch recorded and describes
// nothing. Attribution: the calls pass
// through a recording proxy and count when their InstanceId.N parameters
// name the instance; a batched call naming it counts once. The instance is
// shutting-down or terminated in the simulator at the end (the control
// that the one call did terminate it).
func TestDeletionCallsEC2Once(t *testing.T) {
	runInParallel(t)
	e := newEnvWithoutAutoscaler(t, "karpx-delcalls")
	rec, endpoint := startEC2Recorder(t, e.endpoint)
	e.startAutoscaler(e.log.WithName("karpx"), func(o *operator.Options) { o.EC2Endpoint = endpoint })
	e.apply(ec2NodeClassYAML("delcalls", e.name), deletionCallsManifest)

	for _, path := range []string{"NodeClaim", "Node"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "solo-" + strings.ToLower(path), Namespace: "default", Labels: map[string]string{"app": "delcalls"}},
			Spec: *deployment("delcalls", 1, "300m", "256Mi").Spec.Template.Spec.DeepCopy()}
		pod.Spec.NodeSelector = map[string]string{"delcalls": "yes"}
		if err := e.kube.Create(e.ctx, pod); err != nil {
			t.Fatal(err)
		}
		var nc karpv1.NodeClaim
		e.eventually(120*time.Second, path+": the pod Running on an Initialized NodeClaim", func(ctx context.Context) (bool, error) {
			var live []karpv1.NodeClaim
			for _, c := range e.nodeClaimsOf("delcalls") {
				if c.DeletionTimestamp.IsZero() {
					live = append(live, c)
				}
			}
			if len(live) != 1 || !live[0].StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
				return false, nil
			}
			nc = live[0]
			return countRunning(ctx, e.kube, "delcalls") == 1, nil
		})
		id := nc.Status.ProviderID[strings.LastIndex(nc.Status.ProviderID, "/")+1:]
		termBefore, _ := rec.naming("TerminateInstances", id)
		descBefore, _ := rec.naming("DescribeInstances", id)
		_, descAllBefore := rec.naming("DescribeInstances", id)

		var obj client.Object = &nc
		if path == "Node" {
			obj = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Status.NodeName}}
		}
		if err := e.kube.Delete(e.ctx, obj); err != nil {
			t.Fatal(err)
		}
		e.eventually(120*time.Second, path+": NodeClaim and Node gone", func(ctx context.Context) (bool, error) {
			err := e.kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, &corev1.Node{})
			return e.nodeClaimGone(ctx, nc.Name) && client.IgnoreNotFound(err) == nil && err != nil, nil
		})
		time.Sleep(3 * time.Second) // a late call would show here
		termAfter, _ := rec.naming("TerminateInstances", id)
		descAfter, descAll := rec.naming("DescribeInstances", id)
		terminates, describes := termAfter-termBefore, descAfter-descBefore
		scenarioLogf(t, "deleted by its %s: instance %s: %d TerminateInstances and %d DescribeInstances naming it (%d before the deletion; %d DescribeInstances in all meanwhile)",
			path, id, terminates, describes, descBefore, descAll-descAllBefore)
		if terminates != 1 || descAfter > 1 {
			t.Errorf("deleted by its %s: %d TerminateInstances and %d DescribeInstances named instance %s in its life (%d during the deletion); want 1 and at most 1 (the deletion's)", path, terminates, descAfter, id, describes)
		}
		if e.instanceLive(nc.Status.ProviderID) {
			t.Errorf("deleted by its %s: instance %s still pending or running", path, id)
		}
		if termBefore != 0 {
			t.Errorf("instance %s was named by %d TerminateInstances before its deletion", id, termBefore)
		}
	}
}
