package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
	"github.com/karpx/karpx/autoscaler/aws/providers/sqs"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/ec2sim"
)

// forgedAccount is the account of the forged messages: not the simulator's.
const forgedAccount = "999988887777"

// TestForgedInterruptionMovesNothing: someone who may send to the
// interruption queue (SendMessage, not EventBridge) writes a well-formed
// EC2 Spot Instance Interruption Warning for a running spot node, naming
// another account. The message is deleted and counted in
// karpx_interruption_rejected_messages_total{reason="account_mismatch"};
// for the 20 s after (two disruption periods) the NodeClaim carries no
// interruption mark, the Node is not tainted karpenter.sh/disrupted, and
// nothing is launched or deleted. Control: the same message with the queue
// owner's account (the account in the queue's URL) marks the NodeClaim,
// cordons the Node and replaces it, its pods Running elsewhere.
func TestForgedInterruptionMovesNothing(t *testing.T) {
	runInParallel(t)
	e := newEnvWith(t, "karpx-forged", envOptions{
		sim: func(c *ec2sim.Config) {
			c.InterruptionQueue = interruptionQueue
			c.SpotInterruptionNotice = spotNotice
		},
		tweak: func(o *operator.Options) { o.InterruptionQueue = interruptionQueue },
	})
	e.apply(ec2NodeClassYAML("spot", e.name), spotManifest)
	web := deployment("forged-web", 3, "100m", "64Mi")
	web.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "spot"}
	if err := e.kube.Create(e.ctx, web); err != nil {
		t.Fatal(err)
	}
	e.eventually(180*time.Second, "3 pods Running on 1 Initialized spot NodeClaim", func(ctx context.Context) (bool, error) {
		ncs := e.nodeClaims()
		return countRunning(ctx, e.kube, "forged-web") == 3 && len(ncs) == 1 &&
			ncs[0].StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue(), nil
	})
	victim := e.nodeClaims()[0]
	id := instance.InstanceID(victim.Status.ProviderID)
	stats, err := e.sim.QueueStats(interruptionQueue)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := sqs.AccountOfURL(stats.URL)
	if err != nil {
		t.Fatal(err)
	}
	warning := func(account string) string {
		detail, _ := json.Marshal(ec2sim.SpotInterruptionDetail{InstanceID: id, InstanceAction: "terminate"})
		body, err := json.Marshal(ec2sim.Event{Version: "0", ID: "5e1f0a2c-0000-4000-8000-00000000f0f0", DetailType: ec2sim.DetailTypeSpotInterruption,
			Source: ec2sim.EventSourceEC2, Account: account, Time: time.Now().UTC().Format(time.RFC3339), Region: "us-east-1",
			Resources: []string{"arn:aws:ec2:us-east-1:" + account + ":instance/" + id}, Detail: detail})
		if err != nil {
			t.Fatal(err)
		}
		return string(body)
	}

	rejected0 := rejectedCount(t, "account_mismatch")
	msgID, err := e.sim.SendRawMessage(warning(forgedAccount))
	if err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "the forged message counted and deleted", func(ctx context.Context) (bool, error) {
		left, err := e.sim.QueueMessages(interruptionQueue)
		for _, m := range left {
			if m.MessageID == msgID {
				return false, err
			}
		}
		return err == nil && rejectedCount(t, "account_mismatch") > rejected0, err
	})
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		ncs := e.nodeClaims()
		if len(ncs) != 1 || ncs[0].Name != victim.Name {
			t.Fatalf("NodeClaims %v after a forged message, want only %s", nodeClaimNames(ncs), victim.Name)
		}
		if ncs[0].Annotations[cloudprovider.InterruptionAnnotationKey] != "" || !ncs[0].DeletionTimestamp.IsZero() {
			t.Fatalf("forged message acted on: NodeClaim %s annotations %v, deletion %v", victim.Name, ncs[0].Annotations, ncs[0].DeletionTimestamp)
		}
		if tainted, err := disrupted(e, victim.Status.NodeName); err != nil || tainted {
			t.Fatalf("forged message cordoned Node %s (%v)", victim.Status.NodeName, err)
		}
	}
	if n := countRunning(e.ctx, e.kube, "forged-web"); n != 3 {
		t.Fatalf("%d of 3 pods Running after a forged message", n)
	}

	// Control: the same warning from the queue owner's account.
	start := time.Now()
	if _, err := e.sim.SendRawMessage(warning(owner)); err != nil {
		t.Fatal(err)
	}
	cordoned := false
	e.eventually(120*time.Second, "the interrupted node cordoned and replaced, its pods Running elsewhere", func(ctx context.Context) (bool, error) {
		if !cordoned {
			tainted, err := disrupted(e, victim.Status.NodeName)
			cordoned = err == nil && tainted
		}
		var pods corev1.PodList
		if err := e.kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "forged-web"}); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == victim.Status.NodeName {
				return false, nil
			}
		}
		for _, nc := range e.nodeClaims() {
			if nc.Name == victim.Name {
				return false, nil
			}
		}
		return cordoned && countRunning(ctx, e.kube, "forged-web") == 3, nil
	})
	scenarioLogf(t, "scenario forged interruption: a spot warning of account %s for %s deleted unacted on (node untouched for 20 s); the same warning of the queue owner %s replaced the node in %.1fs",
		forgedAccount, id, owner, time.Since(start).Seconds())
}

// rejectedCount is the in-process
// karpx_interruption_rejected_messages_total{reason}, 0 when absent.
func rejectedCount(t *testing.T, reason string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "karpx_interruption_rejected_messages_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// disrupted reports whether the Node carries karpenter.sh/disrupted (the
// cordon of every drain); a Node already gone is not.
func disrupted(e *env, node string) (bool, error) {
	var n corev1.Node
	if err := e.kube.Get(e.ctx, client.ObjectKey{Name: node}, &n); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey {
			return true, nil
		}
	}
	return n.Spec.Unschedulable, nil
}

func nodeClaimNames(ncs []karpv1.NodeClaim) []string {
	out := make([]string, 0, len(ncs))
	for _, nc := range ncs {
		out = append(out, nc.Name)
	}
	return out
}
