package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/ec2sim"
)

// launchErrorBackoff is the autoscaler's LaunchBackoffBase in
// TestLaunchErrorIsAnEventNotAHotLoop: the first retry of the failed
// NodeClaim comes this long after the failure, the second twice as long
// after the first. Short, so that the test does not wait for the default
// 30 s; the watch window is half of it, as it was of the default.
const launchErrorBackoff = 10 * time.Second

// launchErrorWindow is how long the test watches for CreateFleet calls
// after the failure: a hot loop makes many, a backoff at most one (the
// first retry, if the window reaches it).
const launchErrorWindow = launchErrorBackoff / 2

// TestLaunchErrorIsAnEventNotAHotLoop: EC2 rejects every CreateFleet with
// InvalidParameterValue. karpx must surface the error as a Warning event and
// a Launched=False condition on the NodeClaim, keep running, not create more
// NodeClaims for the same pods, and back off instead of calling CreateFleet
// in a loop. When EC2 accepts launches again, the same NodeClaim launches.
func TestLaunchErrorIsAnEventNotAHotLoop(t *testing.T) {
	e := newEnvWithLog(t, "karpx-e2e-errors", func(o *operator.Options) { o.LaunchBackoffBase = launchErrorBackoff }, nil)
	if err := e.sim.Faults().Add(ec2sim.FaultRule{
		Action: "CreateFleet", Code: "InvalidParameterValue", HTTPStatus: 400,
		Message: "Value (karpx-test) for parameter launchTemplate is invalid.",
	}); err != nil {
		t.Fatal(err)
	}
	e.applyExample("general-purpose.yaml")
	if err := e.kube.Create(e.ctx, deployment("rejected", 3, "500m", "512Mi")); err != nil {
		t.Fatal(err)
	}

	var failed karpv1.NodeClaim
	e.eventually(60*time.Second, "a LaunchFailed event naming the AWS error code on a NodeClaim", func(ctx context.Context) (bool, error) {
		var events corev1.EventList
		if err := e.kube.List(ctx, &events); err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Kind == "NodeClaim" && ev.Reason == "LaunchFailed" && ev.Type == corev1.EventTypeWarning &&
				strings.Contains(ev.Message, "InvalidParameterValue") {
				t.Logf("event: %s %s: %s", ev.InvolvedObject.Name, ev.Reason, ev.Message)
				return true, e.kube.Get(ctx, client.ObjectKey{Name: ev.InvolvedObject.Name}, &failed)
			}
		}
		return false, nil
	})
	cond := failed.StatusConditions().Get(karpv1.ConditionTypeLaunched)
	if cond == nil || cond.IsTrue() || cond.Reason != "LaunchFailed" {
		t.Errorf("NodeClaim %s: Launched condition %+v, want False with reason LaunchFailed", failed.Name, cond)
	}

	// Watch: no new NodeClaims for the same pods, no hot loop.
	before := e.sim.Counts()["CreateFleet"]
	time.Sleep(launchErrorWindow)
	after := e.sim.Counts()["CreateFleet"]
	var claims karpv1.NodeClaimList
	if err := e.kube.List(e.ctx, &claims); err != nil {
		t.Fatal(err)
	}
	scenarioLogf(t, "scenario launch-error: CreateFleet calls %d before, %d after %s (backoff %s); %d NodeClaims", before, after, launchErrorWindow, launchErrorBackoff, len(claims.Items))
	if len(claims.Items) != 1 {
		t.Errorf("%d NodeClaims exist; the pods of the failed NodeClaim were provisioned for again", len(claims.Items))
	}
	if after-before > 1 {
		t.Errorf("CreateFleet called %d times in %s after a persistent error (backoff %s): not backing off", after-before, launchErrorWindow, launchErrorBackoff)
	}

	// EC2 recovers: the same NodeClaim launches after its backoff, and the pods run.
	e.sim.Faults().Clear()
	e.eventually(90*time.Second, "the failed NodeClaim launches once EC2 accepts launches", func(ctx context.Context) (bool, error) {
		var nc karpv1.NodeClaim
		if err := e.kube.Get(ctx, client.ObjectKeyFromObject(&failed), &nc); err != nil {
			return false, err
		}
		return nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue(), nil
	})
	e.eventually(30*time.Second, "the pods Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "rejected") == 3, nil
	})
}
