package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/catalog"
	"github.com/karpx/karpx/ec2sim"
)

// TestEndToEndProvisioning is the main job: Karpenter's general-purpose
// example, unchanged but for the cluster name, and 30 pending pods of
// 500m / 512Mi. karpx must launch instances in the simulator whose Nodes
// join, get every pod Running within 90 s with no more CreateFleet calls
// than NodeClaims, and leave the cluster consistent when the pods go.
func TestEndToEndProvisioning(t *testing.T) {
	e := newEnv(t, "karpx-e2e")
	e.applyExample("general-purpose.yaml")

	const replicas = 30
	dep := deployment("inflate", replicas, "500m", "512Mi")
	if err := e.kube.Create(e.ctx, dep); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.eventually(90*time.Second, "all 30 pods Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "inflate") == replicas, nil
	})
	scenarioLogf(t, "scenario main: %d pods Running %.1fs after the Deployment was created", replicas, time.Since(start).Seconds())

	var nodeClaims karpv1.NodeClaimList
	if err := e.kube.List(e.ctx, &nodeClaims); err != nil {
		t.Fatal(err)
	}
	if len(nodeClaims.Items) == 0 {
		t.Fatal("pods are Running but there is no NodeClaim")
	}
	e.eventually(30*time.Second, "every NodeClaim Initialized", func(ctx context.Context) (bool, error) {
		if err := e.kube.List(ctx, &nodeClaims); err != nil {
			return false, err
		}
		for _, nc := range nodeClaims.Items {
			if !nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
				return false, nil
			}
		}
		return true, nil
	})

	// Every pod runs on a node backed by a simulator instance, of a type
	// that exists in the catalogue and fits the pods placed on it.
	instances := map[string]ec2sim.Instance{}
	for _, in := range e.sim.Instances() {
		instances[in.ID] = in
	}
	var pods corev1.PodList
	if err := e.kube.List(e.ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "inflate"}); err != nil {
		t.Fatal(err)
	}
	requested := map[string]corev1.ResourceList{}
	for _, p := range pods.Items {
		rl := requested[p.Spec.NodeName]
		if rl == nil {
			rl = corev1.ResourceList{corev1.ResourceCPU: resource.Quantity{}, corev1.ResourceMemory: resource.Quantity{}}
			requested[p.Spec.NodeName] = rl
		}
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			q := rl[name]
			q.Add(p.Spec.Containers[0].Resources.Requests[name])
			rl[name] = q
		}
	}
	for nodeName, req := range requested {
		var node corev1.Node
		if err := e.kube.Get(e.ctx, client.ObjectKey{Name: nodeName}, &node); err != nil {
			t.Fatalf("node %s: %v", nodeName, err)
		}
		id := node.Spec.ProviderID[strings.LastIndex(node.Spec.ProviderID, "/")+1:]
		in, ok := instances[id]
		if !ok || !strings.HasPrefix(node.Spec.ProviderID, "aws:///") {
			t.Errorf("node %s has providerID %q, not a simulator instance", nodeName, node.Spec.ProviderID)
			continue
		}
		it, ok := catalog.Get(in.InstanceType)
		if !ok {
			t.Errorf("node %s: instance type %q is not in the catalogue", nodeName, in.InstanceType)
			continue
		}
		for name, q := range req {
			if alloc := it.Allocatable[name]; q.Cmp(alloc) > 0 {
				t.Errorf("node %s (%s): pods request %s %s, more than its allocatable %s", nodeName, it.Name, q.String(), name, alloc.String())
			}
		}
		if cat := it.Labels["karpenter.k8s.aws/instance-category"]; !strings.Contains("cmr", cat) || it.Arch() != "amd64" {
			t.Errorf("node %s: %s violates the NodePool requirements (category %s, arch %s)", nodeName, it.Name, cat, it.Arch())
		}
	}
	fleets := e.sim.Counts()["CreateFleet"]
	scenarioLogf(t, "scenario main: %d NodeClaims, %d nodes, %d CreateFleet calls, counts %v", len(nodeClaims.Items), len(requested), fleets, e.sim.Counts())
	if fleets > int64(len(nodeClaims.Items)) {
		t.Errorf("CreateFleet called %d times for %d NodeClaims", fleets, len(nodeClaims.Items))
	}

	// kubectl karpx status, through the real kubectl, shows the NodeClaims.
	path := buildPlugin(t, e.root)
	status := e.kubectlWithPath(path, "karpx", "status")
	t.Logf("kubectl karpx status:\n%s", status)
	for _, nc := range nodeClaims.Items {
		if !strings.Contains(status, nc.Name) {
			t.Errorf("kubectl karpx status does not show NodeClaim %s", nc.Name)
		}
	}
	if !strings.Contains(status, "general-purpose") || !strings.Contains(status, "Initialized") {
		t.Errorf("kubectl karpx status lacks the NodePool or the Initialized phase")
	}
	help := e.kubectlWithPath(path, "karpx", "--help")
	if !strings.Contains(help, "status") {
		t.Errorf("kubectl karpx --help does not document status:\n%s", help)
	}

	// Deleting the pods' owner scales the cluster down (the example
	// NodePool defaults to WhenEmptyOrUnderutilized after 0s) and leaves it
	// consistent: no NodeClaim without an instance, no instance without a
	// NodeClaim, no Node left behind.
	if err := e.kube.Delete(e.ctx, dep, client.PropagationPolicy("Foreground")); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "pods deleted", func(ctx context.Context) (bool, error) {
		var left corev1.PodList
		err := e.kube.List(ctx, &left, client.InNamespace("default"), client.MatchingLabels{"app": "inflate"})
		return err == nil && len(left.Items) == 0, err
	})
	if err := consistent(e); err != nil {
		t.Error(err)
	}
	gone := time.Now()
	e.eventually(90*time.Second, "every NodeClaim, Node and instance gone after the pods left", func(ctx context.Context) (bool, error) {
		var ncs karpv1.NodeClaimList
		var nodes corev1.NodeList
		if err := e.kube.List(ctx, &ncs); err != nil {
			return false, err
		}
		if err := e.kube.List(ctx, &nodes); err != nil {
			return false, err
		}
		live := 0
		for _, in := range e.sim.Instances() {
			if in.State == "pending" || in.State == "running" {
				live++
			}
		}
		return len(ncs.Items) == 0 && len(nodes.Items) == 0 && live == 0, nil
	})
	scenarioLogf(t, "scenario main: scaled to zero %.1fs after the pods left", time.Since(gone).Seconds())
}

func (e *env) kubectlWithPath(path string, args ...string) string {
	e.t.Helper()
	// kubectl does not accept global flags before a plugin's name, so the
	// kubeconfig goes through the environment, as a user's would.
	cmd := exec.CommandContext(e.ctx, "kubectl", args...)
	cmd.Env = append(cmd.Environ(), "PATH="+path, "KUBECONFIG="+e.cluster.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func countRunning(ctx context.Context, kube client.Client, app string) int {
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		return 0
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() {
			n++
		}
	}
	return n
}

// consistent checks that every NodeClaim's instance is live in the
// simulator (unless the NodeClaim is being deleted) and every live instance
// belongs to a NodeClaim.
func consistent(e *env) error {
	var nodeClaims karpv1.NodeClaimList
	if err := e.kube.List(e.ctx, &nodeClaims); err != nil {
		return err
	}
	live := map[string]ec2sim.Instance{}
	for _, in := range e.sim.Instances() {
		if in.State == "pending" || in.State == "running" {
			live[in.ID] = in
		}
	}
	var problems []string
	claimed := map[string]bool{}
	for _, nc := range nodeClaims.Items {
		id := nc.Status.ProviderID[strings.LastIndex(nc.Status.ProviderID, "/")+1:]
		claimed[id] = true
		if _, ok := live[id]; !ok && nc.DeletionTimestamp.IsZero() {
			problems = append(problems, fmt.Sprintf("NodeClaim %s has no live instance (providerID %q)", nc.Name, nc.Status.ProviderID))
		}
	}
	for id, in := range live {
		if !claimed[id] {
			problems = append(problems, fmt.Sprintf("instance %s (%s) has no NodeClaim (tags %v)", id, in.InstanceType, in.Tags))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("cluster inconsistent:\n%s", strings.Join(problems, "\n"))
	}
	return nil
}
