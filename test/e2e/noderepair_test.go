package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/controllers/node/health"
	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/ec2sim"
)

// Node repair's scenario. The toleration durations are Karpenter's
// constants (30 minutes for Ready and for the node monitoring agent's
// NetworkingReady) and nothing in karpx shortens them: the scenario
// instead starts watching Nodes that have been broken for a while, the
// simulated kubelet posting the condition with a lastTransitionTime in
// the past (ec2sim.NodeConditionFault.Since), as a node that broke before
// anyone looked.

// repairLead is how long before its toleration runs out the repaired
// Node's condition is posted: the test checks nothing happens for most
// of it, then that the repair comes.
const repairLead = 30 * time.Second

// instanceID is the EC2 instance ID of a providerID.
func instanceID(providerID string) string {
	return providerID[strings.LastIndex(providerID, "/")+1:]
}

// poolClaims returns the NodeClaims of pool.
func (e *env) poolClaims(ctx context.Context, pool string) ([]karpv1.NodeClaim, error) {
	var list karpv1.NodeClaimList
	err := e.kube.List(ctx, &list, client.MatchingLabels{karpv1.NodePoolLabelKey: pool})
	return list.Items, err
}

// runningOff counts app's pods Running (not being deleted) on Nodes other
// than not.
func (e *env) runningOff(ctx context.Context, app, not string) int {
	var pods corev1.PodList
	if err := e.kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		return 0
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() && p.Spec.NodeName != not {
			n++
		}
	}
	return n
}

// nodeCondition is the status of node's condition of type t, "" when it
// has none (or the Node cannot be read).
func (e *env) nodeCondition(ctx context.Context, node string, t corev1.NodeConditionType) corev1.ConditionStatus {
	var n corev1.Node
	if err := e.kube.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		return ""
	}
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// statusLineHas reports whether one line of out holds every field.
func statusLineHas(out string, fields ...string) bool {
	for line := range strings.Lines(out) {
		all := true
		for _, f := range fields {
			all = all && strings.Contains(line, f)
		}
		if all {
			return true
		}
	}
	return false
}

// repairBlockedEvents counts the NodeRepairBlocked events on node.
func (e *env) repairBlockedEvents(ctx context.Context, node string) int {
	var evs corev1.EventList
	if err := e.kube.List(ctx, &evs); err != nil {
		return 0
	}
	n := 0
	for _, ev := range evs.Items {
		if ev.InvolvedObject.Kind == "Node" && ev.InvolvedObject.Name == node && ev.Reason == health.ReasonNodeRepairBlocked {
			n++
		}
	}
	return n
}

// startRepairWorkloads applies two NodePools and their Deployments:
// "solo", one node running web, and "pair", two nodes (one api pod each,
// 1.5 CPU on an m5.large), none of them ever consolidated. It returns
// the solo NodeClaim and the pair's two.
func (e *env) startRepairWorkloads() (karpv1.NodeClaim, []karpv1.NodeClaim) {
	t := e.t
	t.Helper()
	solo := nodePool{Name: "solo", Labels: map[string]string{"pool": "solo"}, InstanceTypes: []string{"m5.large"},
		CapacityTypes: []string{onDemand}, Disruption: neverConsolidate}
	pair := nodePool{Name: "pair", Labels: map[string]string{"pool": "pair"}, InstanceTypes: []string{"m5.large"},
		CapacityTypes: []string{onDemand}, Disruption: neverConsolidate}
	e.apply(ec2NodeClassYAML("solo", e.name), solo.yaml(), ec2NodeClassYAML("pair", e.name), pair.yaml())
	web := deployment("web", 1, "500m", "256Mi")
	web.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "solo"}
	api := deployment("api", 2, "1500m", "256Mi")
	api.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "pair"}
	for _, d := range []client.Object{web, api} {
		if err := e.kube.Create(e.ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	var soloNC karpv1.NodeClaim
	var pairNCs []karpv1.NodeClaim
	e.eventually(180*time.Second, "web and both api pods Running on Initialized NodeClaims", func(ctx context.Context) (bool, error) {
		if countRunning(ctx, e.kube, "web") != 1 || countRunning(ctx, e.kube, "api") != 2 {
			return false, nil
		}
		s, err := e.poolClaims(ctx, "solo")
		if err != nil {
			return false, err
		}
		p, err := e.poolClaims(ctx, "pair")
		if err != nil || len(s) != 1 || len(p) != 2 {
			return false, err
		}
		for _, nc := range append(append([]karpv1.NodeClaim{}, s...), p...) {
			if !nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
				return false, nil
			}
		}
		soloNC, pairNCs = s[0], p
		return true, nil
	})
	return soloNC, pairNCs
}

// TestNodeRepair: with --feature-gates NodeRepair=true, the Node of pool
// "solo" reports Ready=False (its kubelet gone) since 30 s short of
// Karpenter's 30-minute toleration: for most of those 30 s nothing
// happens, then its NodeClaim is annotated with the repair time and
// deleted, its pod deleted at once (the node is broken: no eviction is
// waited for), and web runs on a new node while the old instance is
// terminated. Above the cap nothing is repaired: both Nodes of pool
// "pair" report the node monitoring agent's NetworkingReady=False past
// its 30 minutes (one since a minute ago), 2 of 2 is more than 20%
// (rounded up, 1), so both stay, each with a Warning NodeRepairBlocked
// event, and kubectl karpx status lists both under "Unhealthy nodes".
// The control, karpx with the gate off (its default, as Karpenter's), is
// TestNodeRepairGateOffLeavesTheNode.
func TestNodeRepair(t *testing.T) {
	runInParallel(t)
	e := newEnvWithLog(t, "karpx-repair", func(o *operator.Options) { o.FeatureGates = "NodeRepair=true" }, nil)
	soloNC, pairNCs := e.startRepairWorkloads()

	now := time.Now()
	if err := e.sim.SetNodeCondition(ec2sim.NodeConditionFault{InstanceIDs: []string{instanceID(soloNC.Status.ProviderID)},
		Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Since: now.Add(-30*time.Minute + repairLead)}); err != nil {
		t.Fatal(err)
	}
	// The pair's first Node goes bad 29 minutes ago (due in a minute) and
	// is seen unhealthy before the second reports a NetworkingReady=False
	// already past its toleration: the cap is evaluated per Node when its
	// toleration runs out, against the Nodes seen unhealthy then, so Nodes
	// that break in the same instant could be repaired before their
	// neighbours are counted (as in Karpenter).
	if err := e.sim.SetNodeCondition(ec2sim.NodeConditionFault{InstanceIDs: []string{instanceID(pairNCs[0].Status.ProviderID)},
		Type: "NetworkingReady", Status: corev1.ConditionFalse, Reason: "IPAMDNotReady", Since: now.Add(-29 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	due := now.Add(repairLead)
	e.eventually(20*time.Second, "the solo Node Ready=False, the first pair Node NetworkingReady=False", func(ctx context.Context) (bool, error) {
		return e.nodeCondition(ctx, soloNC.Status.NodeName, corev1.NodeReady) == corev1.ConditionFalse &&
			e.nodeCondition(ctx, pairNCs[0].Status.NodeName, "NetworkingReady") == corev1.ConditionFalse, nil
	})
	time.Sleep(2 * time.Second) // the controller's cache follows the API server
	if err := e.sim.SetNodeCondition(ec2sim.NodeConditionFault{InstanceIDs: []string{instanceID(pairNCs[1].Status.ProviderID)},
		Type: "NetworkingReady", Status: corev1.ConditionFalse, Reason: "IPAMDNotReady", Since: now.Add(-31 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	pairDue := now.Add(time.Minute)

	// Before the toleration runs out nothing is repaired (checked until
	// 5 s before, for the clocks' skew).
	for time.Until(due) > 5*time.Second {
		var nc karpv1.NodeClaim
		if err := e.kube.Get(e.ctx, client.ObjectKey{Name: soloNC.Name}, &nc); err != nil {
			t.Fatal(err)
		}
		if !nc.DeletionTimestamp.IsZero() {
			t.Fatalf("the solo NodeClaim was deleted %s before its Node's 30 minutes of Ready=False ran out", time.Until(due).Round(time.Second))
		}
		time.Sleep(time.Second)
	}

	var repairedAt time.Time // the NodeClaim's deletionTimestamp
	e.eventually(time.Until(due)+60*time.Second, "the solo NodeClaim annotated with the repair time and deleted", func(ctx context.Context) (bool, error) {
		var nc karpv1.NodeClaim
		if err := e.kube.Get(ctx, client.ObjectKey{Name: soloNC.Name}, &nc); err != nil {
			// Already gone between two polls: deleted by now.
			repairedAt = time.Now()
			return client.IgnoreNotFound(err) == nil, client.IgnoreNotFound(err)
		}
		stamp, err := time.Parse(time.RFC3339, nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey])
		if nc.DeletionTimestamp.IsZero() || err != nil || stamp.Before(due.Add(-5*time.Second).Truncate(time.Second)) {
			return false, nil
		}
		repairedAt = nc.DeletionTimestamp.Time
		return true, nil
	})
	e.eventually(240*time.Second, "web Running on a new solo node and the broken node's instance terminated", func(ctx context.Context) (bool, error) {
		if e.runningOff(ctx, "web", soloNC.Status.NodeName) != 1 || !e.nodeClaimGone(ctx, soloNC.Name) || e.instanceLive(soloNC.Status.ProviderID) {
			return false, nil
		}
		claims, err := e.poolClaims(ctx, "solo")
		return err == nil && len(claims) == 1 && claims[0].Name != soloNC.Name &&
			claims[0].StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue(), err
	})
	replaced := time.Since(repairedAt)
	late := repairedAt.Sub(due.Truncate(time.Second))

	// Above the cap: the pair stays, each Node told why, also once the
	// first one's toleration ran out.
	e.eventually(time.Until(pairDue)+30*time.Second, "NodeRepairBlocked on both pair Nodes", func(ctx context.Context) (bool, error) {
		return e.repairBlockedEvents(ctx, pairNCs[0].Status.NodeName) > 0 && e.repairBlockedEvents(ctx, pairNCs[1].Status.NodeName) > 0, nil
	})
	for _, old := range pairNCs {
		var nc karpv1.NodeClaim
		if err := e.kube.Get(e.ctx, client.ObjectKey{Name: old.Name}, &nc); err != nil || !nc.DeletionTimestamp.IsZero() {
			t.Fatalf("pair NodeClaim %s repaired above the cap (err %v)", old.Name, err)
		}
		if _, ok := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; ok {
			t.Fatalf("pair NodeClaim %s annotated for termination above the cap", old.Name)
		}
	}
	if n := countRunning(e.ctx, e.kube, "api"); n != 2 {
		t.Fatalf("%d api pods Running on the unrepaired pair, want 2", n)
	}
	// kubectl karpx status lists both under "Unhealthy nodes".
	status := e.kubectlWithPath(buildPlugin(t, e.root), "karpx", "status")
	for _, nc := range pairNCs {
		if !statusLineHas(status, nc.Name, "node "+nc.Status.NodeName, "NetworkingReady=False for 3", "(IPAMDNotReady)") {
			t.Errorf("kubectl karpx status does not list %s as unhealthy (NetworkingReady=False for 31m):\n%s", nc.Name, status)
		}
	}
	if !strings.Contains(status, "Unhealthy nodes:") {
		t.Errorf("kubectl karpx status has no \"Unhealthy nodes:\" section:\n%s", status)
	}
	scenarioLogf(t, "scenario node-repair: solo Node Ready=False deleted %s after its 30m toleration ran out (API server seconds), web Running on a new node and the old instance terminated %s after the deletion; pair (2 of 2 NetworkingReady=False) not repaired, NodeRepairBlocked",
		late, replaced.Round(time.Second))
}

// TestNodeRepairGateOffLeavesTheNode is TestNodeRepair's control: karpx
// with its default feature gates (NodeRepair=false, Karpenter's default
// too) leaves a Node whose Ready has been False for 31 minutes, past the
// toleration, for a bounded minute: its NodeClaim is neither deleted nor
// annotated, and nothing replaces it.
func TestNodeRepairGateOffLeavesTheNode(t *testing.T) {
	runInParallel(t)
	e := newEnv(t, "karpx-repair-off")
	pool := nodePool{Name: "solo", Labels: map[string]string{"pool": "solo"}, InstanceTypes: []string{"m5.large"},
		CapacityTypes: []string{onDemand}, Disruption: neverConsolidate}
	e.apply(ec2NodeClassYAML("solo", e.name), pool.yaml())
	web := deployment("web", 1, "500m", "256Mi")
	web.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "solo"}
	if err := e.kube.Create(e.ctx, web); err != nil {
		t.Fatal(err)
	}
	e.eventually(120*time.Second, "web Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "web") == 1, nil
	})
	old := e.onlyNodeClaim()
	if err := e.sim.SetNodeCondition(ec2sim.NodeConditionFault{InstanceIDs: []string{instanceID(old.Status.ProviderID)},
		Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Since: time.Now().Add(-31 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Second) {
		var nc karpv1.NodeClaim
		if err := e.kube.Get(e.ctx, client.ObjectKey{Name: old.Name}, &nc); err != nil || !nc.DeletionTimestamp.IsZero() {
			t.Fatalf("with NodeRepair=false the broken node's NodeClaim went (err %v)", err)
		}
		if _, ok := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; ok {
			t.Fatal("with NodeRepair=false the broken node's NodeClaim was annotated for termination")
		}
		claims, err := e.poolClaims(e.ctx, "solo")
		if err != nil || len(claims) != 1 {
			t.Fatalf("%d NodeClaims in the pool (err %v); want the broken one alone", len(claims), err)
		}
	}
	scenarioLogf(t, "scenario node-repair control: NodeRepair=false, a Node Ready=False for 31m left for 60 s (never repaired)")
}
