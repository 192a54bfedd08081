package upstream

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/ec2sim"
)

// TestUpstreamInstanceStatusCheck is the control of karpx's
// TestInstanceStatusCheckReplacesTheInstance (test/e2e,
// docs/node-repair.md): the real Karpenter AWS provider, with its default
// feature gates, on the same simulator fault. The instance of NodePool
// solo's one node fails its EC2 instance status check
// (ec2sim.FailStatusChecks) while kubelet stays Ready; Karpenter's
// interruption.instancestatus controller leaves it for its 2-minute
// toleration, then annotates the NodeClaim
// karpenter.sh/nodeclaim-termination-timestamp and deletes it
// (InstanceUnhealthy on the NodeClaim), web runs on a new node, and
// NodePool keep's healthy node stays. The bounds are the ones karpx's test
// asserts, so a difference in semantics fails one of the two.
func TestUpstreamInstanceStatusCheck(t *testing.T) {
	e := startAWSEnv(t, 12*time.Minute, "", nil)
	ctx, c, kube, sim := e.ctx, e.cluster, e.kube, e.sim

	if _, err := c.Kubectl(ctx, []byte(EC2NodeClassYAML("default", c.Name, "al2023@latest")), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	for _, pool := range []string{"solo", "keep"} {
		if err := kube.Create(ctx, nodePool(pool, "default", map[string]string{"pool": pool})); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []struct{ app, pool string }{{"web", "solo"}, {"api", "keep"}} {
		if err := kube.Create(ctx, deployment(d.app, 1, "1", map[string]string{"pool": d.pool})); err != nil {
			t.Fatal(err)
		}
	}
	var solo, keep karpv1.NodeClaim
	e.eventually(4*time.Minute, "web and api Running on Initialized NodeClaims", func(ctx context.Context) (bool, error) {
		s, err := e.claimsOf(ctx, "solo")
		if err != nil || len(s) != 1 || !conditionTrue(&s[0], karpv1.ConditionTypeInitialized) {
			return false, err
		}
		k, err := e.claimsOf(ctx, "keep")
		if err != nil || len(k) != 1 || !conditionTrue(&k[0], karpv1.ConditionTypeInitialized) {
			return false, err
		}
		solo, keep = s[0], k[0]
		return e.webRunningOff(ctx, ""), nil
	})

	failedAt := time.Now()
	id := solo.Status.ProviderID[strings.LastIndex(solo.Status.ProviderID, "/")+1:]
	if err := sim.FailStatusChecks(ec2sim.StatusCheckFault{InstanceIDs: []string{id}, Instance: true}); err != nil {
		t.Fatal(err)
	}
	due := failedAt.Add(2 * time.Minute) // Karpenter's instancestatus.UnhealthyThreshold
	for time.Until(due) > 5*time.Second {
		var nc karpv1.NodeClaim
		if err := kube.Get(ctx, client.ObjectKey{Name: solo.Name}, &nc); err != nil {
			t.Fatal(err)
		}
		if !nc.DeletionTimestamp.IsZero() {
			t.Fatalf("Karpenter deleted the NodeClaim %s before the 2-minute toleration ran out", time.Until(due).Round(time.Second))
		}
		time.Sleep(time.Second)
	}
	var deletedAt time.Time
	e.eventually(time.Until(due)+90*time.Second, "Karpenter's NodeClaim annotated with the termination time and deleted", func(ctx context.Context) (bool, error) {
		var nc karpv1.NodeClaim
		if err := kube.Get(ctx, client.ObjectKey{Name: solo.Name}, &nc); err != nil {
			deletedAt = time.Now()
			return client.IgnoreNotFound(err) == nil, client.IgnoreNotFound(err)
		}
		_, annotated := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]
		if nc.DeletionTimestamp.IsZero() || !annotated {
			return false, nil
		}
		deletedAt = nc.DeletionTimestamp.Time
		return true, nil
	})
	e.eventually(4*time.Minute, "web Running on a new node", func(ctx context.Context) (bool, error) {
		return e.webRunningOff(ctx, solo.Status.NodeName), nil
	})
	var nc karpv1.NodeClaim
	if err := kube.Get(ctx, client.ObjectKey{Name: keep.Name}, &nc); err != nil || !nc.DeletionTimestamp.IsZero() {
		t.Fatalf("Karpenter replaced the healthy NodeClaim %s (err %v)", keep.Name, err)
	}
	var evs corev1.EventList
	if err := kube.List(ctx, &evs); err != nil {
		t.Fatal(err)
	}
	unhealthy := false
	for _, ev := range evs.Items {
		unhealthy = unhealthy || (ev.InvolvedObject.Kind == "NodeClaim" && ev.InvolvedObject.Name == solo.Name && ev.Reason == "InstanceUnhealthy")
	}
	if !unhealthy {
		t.Errorf("no InstanceUnhealthy event on the NodeClaim %s", solo.Name)
	}
	t.Logf("scenario instance-status upstream: Karpenter %s deleted the impaired instance's NodeClaim %s after the fault (toleration 2m), web Running elsewhere; the healthy neighbour kept",
		AWSVersion, deletedAt.Sub(failedAt).Round(time.Second))
}
