package e2e

import (
	"context"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/aws/controllers/instancestatus"
	awsinstancestatus "github.com/karpx/karpx/autoscaler/aws/providers/instancestatus"
	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/ec2sim"
)

// TestInstanceStatusCheckReplacesTheInstance: the instance of pool
// "solo"'s one node fails its EC2 instance status check
// (ec2sim.FailStatusChecks; DescribeInstanceStatus reports it impaired)
// while kubelet keeps posting Ready=True. karpx's instancestatus
// controller, polling every minute with the default feature gates, leaves
// it for the 2-minute toleration (kubectl karpx status lists it with the
// time left), then annotates its NodeClaim with the termination timestamp
// and deletes it (InstanceUnhealthy and TerminatingOnInterruption events),
// web runs on a new node and the impaired instance is terminated; the two
// healthy nodes of pool "pair" are kept. The control is the real
// Karpenter AWS provider on the same simulator fault
// (test/upstream TestUpstreamInstanceStatusCheck): the differential is
// that both replace the node within the same bounds.
func TestInstanceStatusCheckReplacesTheInstance(t *testing.T) {
	runInParallel(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	statusAddr := l.Addr().String()
	l.Close()
	e := newEnvWithLog(t, "karpx-instancestatus", func(o *operator.Options) { o.StatusBindAddress = statusAddr }, nil)
	soloNC, pairNCs := e.startRepairWorkloads()
	plugin := buildPlugin(t, e.root) // built now: building it within the toleration would eat into it

	failedAt := time.Now()
	if err := e.sim.FailStatusChecks(ec2sim.StatusCheckFault{InstanceIDs: []string{instanceID(soloNC.Status.ProviderID)}, Instance: true}); err != nil {
		t.Fatal(err)
	}
	due := failedAt.Add(awsinstancestatus.UnhealthyThreshold)
	listed, lastStatus := false, ""
	// Before the toleration runs out nothing is replaced (checked until
	// 5 s before, for the clocks' skew); once a poll has seen the
	// instance (at most a minute after the fault), kubectl karpx status
	// lists it with the time left.
	for time.Until(due) > 5*time.Second {
		var nc karpv1.NodeClaim
		if err := e.kube.Get(e.ctx, client.ObjectKey{Name: soloNC.Name}, &nc); err != nil {
			t.Fatal(err)
		}
		if !nc.DeletionTimestamp.IsZero() {
			t.Fatalf("the solo NodeClaim was deleted %s before its 2-minute toleration ran out", time.Until(due).Round(time.Second))
		}
		if !listed && time.Since(failedAt) > instancestatus.Interval+10*time.Second {
			status := e.kubectlWithPath(plugin, "karpx", "status", "--budget-endpoint", "http://"+statusAddr)
			// "replaced in" while the toleration runs; a loaded machine may
			// answer after it ran out ("due for replacement", "being
			// replaced").
			outcome := "replaced in "
			if time.Since(failedAt) > awsinstancestatus.UnhealthyThreshold-5*time.Second {
				outcome = "; "
			}
			// The poll that sees the fault comes at most a minute after
			// it, plus the poll's own time on a loaded machine: asked
			// again each second until the toleration runs out.
			listed = statusLineHas(status, soloNC.Name, "node "+soloNC.Status.NodeName, instanceID(soloNC.Status.ProviderID), "InstanceStatus reachability for ", outcome)
			lastStatus = status
		}
		time.Sleep(time.Second)
	}
	if !listed {
		t.Fatalf("kubectl karpx status did not list %s as failing its instance status check within the toleration; last answer:\n%s", soloNC.Name, lastStatus)
	}

	var deletedAt time.Time
	e.eventually(time.Until(due)+instancestatus.Interval+30*time.Second, "the solo NodeClaim annotated with the termination time and deleted", func(ctx context.Context) (bool, error) {
		var nc karpv1.NodeClaim
		if err := e.kube.Get(ctx, client.ObjectKey{Name: soloNC.Name}, &nc); err != nil {
			deletedAt = time.Now()
			return client.IgnoreNotFound(err) == nil, client.IgnoreNotFound(err)
		}
		stamp, err := time.Parse(time.RFC3339, nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey])
		if nc.DeletionTimestamp.IsZero() || err != nil {
			return false, nil
		}
		if stamp.Before(due.Add(-5 * time.Second).Truncate(time.Second)) {
			t.Fatalf("termination timestamp %s is before the toleration ran out at %s", stamp, due)
		}
		deletedAt = nc.DeletionTimestamp.Time
		return true, nil
	})
	e.eventually(240*time.Second, "web Running on a new solo node and the impaired instance terminated", func(ctx context.Context) (bool, error) {
		if e.runningOff(ctx, "web", soloNC.Status.NodeName) != 1 || !e.nodeClaimGone(ctx, soloNC.Name) || e.instanceLive(soloNC.Status.ProviderID) {
			return false, nil
		}
		claims, err := e.poolClaims(ctx, "solo")
		return err == nil && len(claims) == 1 && claims[0].Name != soloNC.Name &&
			claims[0].StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue(), err
	})
	replaced := time.Since(deletedAt)
	for _, old := range pairNCs {
		var nc karpv1.NodeClaim
		if err := e.kube.Get(e.ctx, client.ObjectKey{Name: old.Name}, &nc); err != nil || !nc.DeletionTimestamp.IsZero() {
			t.Fatalf("healthy pair NodeClaim %s replaced (err %v)", old.Name, err)
		}
	}
	if n := countRunning(e.ctx, e.kube, "api"); n != 2 {
		t.Fatalf("%d api pods Running on the healthy pair, want 2", n)
	}
	var evs corev1.EventList
	if err := e.kube.List(e.ctx, &evs); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, ev := range evs.Items {
		if ev.InvolvedObject.Kind == "NodeClaim" && ev.InvolvedObject.Name == soloNC.Name {
			reasons[ev.Reason] = true
		}
	}
	if !reasons[instancestatus.ReasonInstanceUnhealthy] || !reasons[instancestatus.ReasonTerminatingOnInterruption] {
		t.Errorf("events on the solo NodeClaim %v, want %s and %s", reasons, instancestatus.ReasonInstanceUnhealthy, instancestatus.ReasonTerminatingOnInterruption)
	}
	scenarioLogf(t, "scenario instance-status: impaired instance's NodeClaim deleted %s after the fault (toleration 2m, poll every 1m), web Running on a new node and the instance terminated %s after the deletion; the 2 healthy neighbours kept",
		deletedAt.Sub(failedAt).Round(time.Second), replaced.Round(time.Second))
}
