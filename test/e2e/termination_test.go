package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	apisv1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/operator"
)

// terminationManifest: one NodePool that never consolidates, so only the
// test's deletions remove nodes.
var terminationManifest = nodePool{Name: "term", Disruption: neverConsolidate, Labels: map[string]string{"term": "yes"},
	InstanceTypes: []string{"m5.xlarge"}, CapacityTypes: []string{onDemand}}.yaml()

// TestTerminationThroughEveryDeletionPath deletes a NodeClaim, a Node and
// a NodePool with the real kubectl and checks that each ends in the same
// drain: the Node is tainted karpenter.sh/disrupted, pods leave through the
// Eviction API (a PodDisruptionBudget holds them until lifted), the
// instance is terminated and neither Node nor NodeClaim nor instance is
// left behind. The EC2NodeClass is deleted last (its finalizer), and the
// autoscaler runs with leader election: the scenario covers the
// controller's whole lifecycle, so the API server's audit log of its
// requests is compared with manifests/controller's RBAC
// (checkControllerRBAC): a permission granted but never used fails.
func TestTerminationThroughEveryDeletionPath(t *testing.T) {
	runInParallel(t)
	e := newEnvWith(t, "karpx-term", envOptions{audit: true, tweak: func(o *operator.Options) {
		o.LeaderElection = true
		// The namespace manifests/controller grants the Lease in.
		o.LeaderElectionNamespace = "karpx"
	}})
	e.apply(ec2NodeClassYAML("term", e.name), terminationManifest)
	web := deployment("web", 4, "300m", "256Mi")
	web.Spec.Template.Spec.NodeSelector = map[string]string{"term": "yes"}
	if err := e.kube.Create(e.ctx, web); err != nil {
		t.Fatal(err)
	}
	solo := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "solo", Namespace: "default", Labels: map[string]string{"app": "solo"}},
		Spec: *web.Spec.Template.Spec.DeepCopy()}
	if err := e.kube.Create(e.ctx, solo); err != nil {
		t.Fatal(err)
	}
	e.eventually(120*time.Second, "web and solo Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "web") == 4 && countRunning(ctx, e.kube, "solo") == 1, nil
	})
	nc := e.onlyNodeClaim()
	nodeName := nc.Status.NodeName
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	if err := e.kube.Create(e.ctx, pdb); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, "the PDB observed", func(ctx context.Context) (bool, error) {
		var got policyv1.PodDisruptionBudget
		err := e.kube.Get(ctx, client.ObjectKeyFromObject(pdb), &got)
		return err == nil && got.Status.ObservedGeneration == got.Generation && got.Status.ExpectedPods == 4, err
	})

	// 1. kubectl delete nodeclaim: cordon (taint), evict what the PDB
	// allows (the bare pod), keep the rest and the instance.
	if _, err := e.cluster.Kubectl(e.ctx, nil, "delete", "nodeclaim", nc.Name, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "node tainted and the bare pod evicted", func(ctx context.Context) (bool, error) {
		var node corev1.Node
		if err := e.kube.Get(ctx, client.ObjectKey{Name: nodeName}, &node); err != nil {
			return false, err
		}
		tainted := false
		for _, tt := range node.Spec.Taints {
			tainted = tainted || tt.Key == karpv1.DisruptedTaintKey
		}
		var pod corev1.Pod
		err := e.kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "solo"}, &pod)
		return tainted && client.IgnoreNotFound(err) == nil && err != nil, nil
	})
	time.Sleep(5 * time.Second)
	if n := e.podsOn(nodeName, "web"); n != 4 {
		t.Fatalf("%d web pods left on the draining node, want all 4 held by the PodDisruptionBudget", n)
	}
	if !e.instanceLive(nc.Status.ProviderID) {
		t.Fatal("the instance was terminated while its pods were still held by a PodDisruptionBudget")
	}
	// Lifting the PDB lets the drain finish; the pods move to a new node.
	if err := e.kube.Delete(e.ctx, pdb); err != nil {
		t.Fatal(err)
	}
	e.eventually(120*time.Second, "first node drained and terminated, web Running elsewhere", func(ctx context.Context) (bool, error) {
		var node corev1.Node
		err := e.kube.Get(ctx, client.ObjectKey{Name: nodeName}, &node)
		return client.IgnoreNotFound(err) == nil && err != nil && !e.instanceLive(nc.Status.ProviderID) &&
			countRunning(ctx, e.kube, "web") == 4 && e.nodeClaimGone(ctx, nc.Name), nil
	})

	// 2. kubectl delete node: the NodeClaim goes with it and the instance
	// is terminated.
	nc = e.onlyNodeClaim()
	if _, err := e.cluster.Kubectl(e.ctx, nil, "delete", "node", nc.Status.NodeName, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	e.eventually(120*time.Second, "deleted Node's NodeClaim and instance gone, web Running elsewhere", func(ctx context.Context) (bool, error) {
		return e.nodeClaimGone(ctx, nc.Name) && !e.instanceLive(nc.Status.ProviderID) && countRunning(ctx, e.kube, "web") == 4, nil
	})

	// 3. Deleting the NodePool removes its NodeClaims (owner references)
	// through the same path.
	nc = e.onlyNodeClaim()
	if _, err := e.cluster.Kubectl(e.ctx, nil, "delete", "nodepool", "term", "--wait=false"); err != nil {
		t.Fatal(err)
	}
	e.eventually(120*time.Second, "NodePool's NodeClaims, Nodes and instances gone", func(ctx context.Context) (bool, error) {
		var ncs karpv1.NodeClaimList
		var nodes corev1.NodeList
		if err := e.kube.List(ctx, &ncs); err != nil {
			return false, err
		}
		if err := e.kube.List(ctx, &nodes); err != nil {
			return false, err
		}
		return len(ncs.Items) == 0 && len(nodes.Items) == 0 && !e.instanceLive(nc.Status.ProviderID), nil
	})
	if err := consistent(e); err != nil {
		t.Error(err)
	}

	// 4. The EC2NodeClass, unused now, goes once the controller removes its
	// finalizer.
	if _, err := e.cluster.Kubectl(e.ctx, nil, "delete", "ec2nodeclass", "term", "--wait=false"); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "EC2NodeClass deleted", func(ctx context.Context) (bool, error) {
		err := e.kube.Get(ctx, client.ObjectKey{Name: "term"}, &apisv1.EC2NodeClass{})
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})
	e.checkControllerRBAC()
}

// onlyNodeClaim waits for exactly one live, Initialized NodeClaim.
func (e *env) onlyNodeClaim() karpv1.NodeClaim {
	e.t.Helper()
	var out karpv1.NodeClaim
	e.eventually(120*time.Second, "exactly one Initialized NodeClaim", func(ctx context.Context) (bool, error) {
		var list karpv1.NodeClaimList
		if err := e.kube.List(ctx, &list); err != nil {
			return false, err
		}
		var live []karpv1.NodeClaim
		for _, nc := range list.Items {
			if nc.DeletionTimestamp.IsZero() {
				live = append(live, nc)
			}
		}
		if len(live) != 1 || !live[0].StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
			return false, nil
		}
		out = live[0]
		return true, nil
	})
	return out
}

func (e *env) nodeClaimGone(ctx context.Context, name string) bool {
	err := e.kube.Get(ctx, client.ObjectKey{Name: name}, &karpv1.NodeClaim{})
	return client.IgnoreNotFound(err) == nil && err != nil
}

// instanceLive reports whether the simulator's instance behind providerID
// is pending or running.
func (e *env) instanceLive(providerID string) bool {
	id := providerID[strings.LastIndex(providerID, "/")+1:]
	for _, in := range e.sim.Instances() {
		if in.ID == id {
			return in.State == "pending" || in.State == "running"
		}
	}
	return false
}

// podsOn counts app's pods bound to node and not being deleted.
func (e *env) podsOn(node, app string) int {
	var pods corev1.PodList
	if err := e.kube.List(e.ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		return -1
	}
	n := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName == node && p.DeletionTimestamp.IsZero() {
			n++
		}
	}
	return n
}
