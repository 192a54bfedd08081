package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// TestDriftRequirementsNarrowed: narrowing a NodePool's instance types
// (a requirement, which Karpenter's NodePool hash leaves out) drifts its
// running NodeClaim with Karpenter v1.14's reason RequirementsDrifted
// (pkg/controllers/nodeclaim/disruption/drift.go) and replaces it with a
// node the new requirements admit; before that, the NodeClaim karpx
// launched is not drifted by any check (its labels, hashes, image,
// subnet and security groups all match). The control is the code before
// requirements drift: the NodeClaim is never Drifted and the replacement
// never comes.
func TestDriftRequirementsNarrowed(t *testing.T) {
	runInParallel(t)
	e := newEnv(t, "karpx-drift")
	pool := nodePool{Name: "drift", Labels: map[string]string{"drift": "yes"}, InstanceTypes: []string{"m5.large"},
		CapacityTypes: []string{onDemand}, Disruption: "{consolidationPolicy: WhenEmpty, consolidateAfter: 0s}"}
	e.apply(ec2NodeClassYAML("drift", e.name), pool.yaml())
	web := deployment("web", 1, "500m", "256Mi")
	web.Spec.Template.Spec.NodeSelector = map[string]string{"drift": "yes"}
	if err := e.kube.Create(e.ctx, web); err != nil {
		t.Fatal(err)
	}
	e.eventually(120*time.Second, "web Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "web") == 1, nil
	})
	old := e.onlyNodeClaim()
	// Two disruption passes (at most 10 s apart) look at it.
	time.Sleep(25 * time.Second)
	var got karpv1.NodeClaim
	if err := e.kube.Get(e.ctx, client.ObjectKey{Name: old.Name}, &got); err != nil {
		t.Fatal(err)
	}
	if cond := got.StatusConditions().Get(karpv1.ConditionTypeDrifted); cond != nil {
		t.Fatalf("the NodeClaim karpx launched is Drifted (%s: %s) before anything changed", cond.Reason, cond.Message)
	}

	pool.InstanceTypes = []string{"c5.large"}
	e.apply(pool.yaml())
	e.eventually(90*time.Second, "the NodeClaim Drifted with reason RequirementsDrifted", func(ctx context.Context) (bool, error) {
		var nc karpv1.NodeClaim
		if err := e.kube.Get(ctx, client.ObjectKey{Name: old.Name}, &nc); err != nil {
			// Already replaced: the condition was seen by the
			// replacement's reason annotation below.
			return false, client.IgnoreNotFound(err)
		}
		cond := nc.StatusConditions().Get(karpv1.ConditionTypeDrifted)
		return cond != nil && cond.IsTrue() && cond.Reason == cloudprovider.DriftReasonRequirements, nil
	})
	e.eventually(180*time.Second, "the drifted node replaced by a c5.large, web Running on it", func(ctx context.Context) (bool, error) {
		if !e.nodeClaimGone(ctx, old.Name) || countRunning(ctx, e.kube, "web") != 1 {
			return false, nil
		}
		var list karpv1.NodeClaimList
		if err := e.kube.List(ctx, &list); err != nil {
			return false, err
		}
		for _, nc := range list.Items {
			if nc.Labels[corev1.LabelInstanceTypeStable] == "c5.large" && nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestExpiryIsForceful: a NodeClaim past its NodePool's expireAfter is
// deleted although the NodePool's budget allows no disruption and its
// only pod has karpenter.sh/do-not-disrupt, as Karpenter v1's expiration
// controller does (pkg/controllers/nodeclaim/expiration); the drain leaves
// the do-not-disrupt pod to terminationGracePeriod (never evicts it), ends
// within it, and the pod runs again on a new node. The controls are the
// code before: expiry waited on the budget and the annotation, and the
// NodeClaim stayed; the old drain evicted the do-not-disrupt pod at once.
func TestExpiryIsForceful(t *testing.T) {
	runInParallel(t)
	e := newEnv(t, "karpx-expiry")
	e.apply(ec2NodeClassYAML("expiry", e.name), `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: expiry}
spec:
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 1h, budgets: [{nodes: "0"}]}
  template:
    metadata: {labels: {expiry: "yes"}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: expiry}
      expireAfter: 1m
      terminationGracePeriod: 30s
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
`)
	web := deployment("web", 1, "500m", "256Mi")
	web.Spec.Template.Spec.NodeSelector = map[string]string{"expiry": "yes"}
	web.Spec.Template.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
	if err := e.kube.Create(e.ctx, web); err != nil {
		t.Fatal(err)
	}
	e.eventually(120*time.Second, "web Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "web") == 1, nil
	})
	old := e.onlyNodeClaim()
	deadline := old.CreationTimestamp.Add(time.Minute)
	e.eventually(time.Until(deadline)+60*time.Second, "the expired NodeClaim deleted despite budget 0 and do-not-disrupt", func(ctx context.Context) (bool, error) {
		var nc karpv1.NodeClaim
		err := e.kube.Get(ctx, client.ObjectKey{Name: old.Name}, &nc)
		return client.IgnoreNotFound(err) == nil && (err != nil || !nc.DeletionTimestamp.IsZero()), nil
	})
	// The do-not-disrupt pod is not evicted, even by this forced drain:
	// it stays until terminationGracePeriod (30 s) deletes it, as in
	// Karpenter v1.14's terminator (the old drain evicted it at once).
	time.Sleep(10 * time.Second)
	if n := e.podsOn(old.Status.NodeName, "web"); n != 1 {
		t.Fatalf("%d web pods on the expiring node 10 s into its drain; want the do-not-disrupt pod left to terminationGracePeriod", n)
	}
	e.eventually(180*time.Second, "the expired node gone and web Running on a new one", func(ctx context.Context) (bool, error) {
		return e.nodeClaimGone(ctx, old.Name) && !e.instanceLive(old.Status.ProviderID) && countRunning(ctx, e.kube, "web") == 1, nil
	})
}
