package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/ec2sim"
)

// The chaos faults that kill the controller: it runs as its own process
// (process_test.go) and is SIGKILLed at a point the simulator makes exact
// by holding an EC2 answer (ec2sim.HoldAnswers): the call has taken effect
// in EC2, the controller has not seen its answer.

// newChaosProcessEnv is newChaosEnv without the in-process autoscaler: the
// test starts karpx-controller processes with controller.
func newChaosProcessEnv(t *testing.T, name string) *chaosEnv {
	c := chaosWorkload(newEnvWithoutAutoscaler(t, name))
	c.kubeconfig = c.controllerKubeconfig()
	return c
}

// controller starts a karpx-controller process named name with the chaos
// suite's garbage-collection timing and args.
func (c *chaosEnv) controller(name string, args ...string) *process {
	return c.startController(c.kubeconfig, name, append([]string{
		"--gc-period=" + chaosGCPeriod.String(),
		"--gc-grace=" + chaosGCGrace.String(),
	}, args...)...)
}

// awaitHeld waits until the simulator holds the answer of a call of
// action and returns it.
func (c *chaosEnv) awaitHeld(action string, within time.Duration) ec2sim.HeldCall {
	c.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case call := <-c.sim.Held():
			if call.Action == action {
				return call
			}
		case <-deadline:
			c.t.Fatalf("no %s answer held within %s", action, within)
		case <-c.ctx.Done():
			c.t.Fatal(c.ctx.Err())
		}
	}
}

// instanceFates counts, of the instances ids, those a NodeClaim now claims
// (adopted), those terminated or shutting down (terminated), and those
// still pending or running unclaimed (orphaned).
func (c *chaosEnv) instanceFates(ids []string) (adopted, terminated, orphaned int) {
	var claims karpv1.NodeClaimList
	if err := c.kube.List(c.ctx, &claims); err != nil {
		c.t.Fatal(err)
	}
	claimed := map[string]bool{}
	for _, nc := range claims.Items {
		if id := nc.Status.ProviderID; id != "" {
			claimed[id[strings.LastIndexByte(id, '/')+1:]] = true
		}
	}
	state := map[string]string{}
	for _, in := range c.sim.Instances() {
		state[in.ID] = in.State
	}
	for _, id := range ids {
		switch {
		case claimed[id]:
			adopted++
		case state[id] == "pending" || state[id] == "running":
			orphaned++
		default:
			terminated++
		}
	}
	return adopted, terminated, orphaned
}

// TestChaosKillAfterCreateFleet: the controller is SIGKILLed after EC2 has
// executed its CreateFleet and before it has written the NodeClaim's
// status (the answer is held until the process is dead). A fresh process
// launches the NodeClaim again with the same ClientToken (derived from the
// NodeClaim) and EC2 answers with the instance already launched: the
// NodeClaim adopts it, no second instance is launched, nothing leaks.
func TestChaosKillAfterCreateFleet(t *testing.T) {
	runInParallel(t)
	c := newChaosProcessEnv(t, "karpx-chaos-kill-launch")
	p := c.controller("chaos-0")
	n := int32(2)
	c.scale(n, 120*time.Second)
	c.rememberHealthy()
	var held []ec2sim.HeldCall
	var worst time.Duration
	kills := chaosScale()
	for i := range kills {
		replays := c.sim.IdempotentReplays()
		c.sim.HoldAnswers("CreateFleet", 1)
		n += 2
		c.setReplicas(n)
		call := c.awaitHeld("CreateFleet", 120*time.Second)
		killed := time.Now()
		p.kill()
		c.sim.ReleaseHeld()
		p = c.controller(fmt.Sprintf("chaos-%d", i+1))
		c.waitRunning(n, 180*time.Second)
		worst = max(worst, time.Since(killed))
		held = append(held, call)
		if len(call.InstanceIDs) == 1 && c.sim.IdempotentReplays() == replays {
			t.Errorf("kill %d: the restarted controller's CreateFleet was not answered from its ClientToken", i+1)
		}
	}
	c.scale(n+2, 120*time.Second)
	c.settle()
	fates := c.heldFates(held)
	c.check("kill-after-create-fleet", worst, fmt.Sprintf("kills=%d %s idempotentReplays=%d", kills, fates, c.sim.IdempotentReplays()))
}

// heldFates checks what became of the instances launched by held
// CreateFleet calls whose caller was killed, once garbage collection had
// its chance (settle), and describes it. The instance of a one-NodeClaim
// launch must be adopted: the fresh controller's CreateFleet carries the
// same ClientToken and gets it back. The instances of a merged launch
// (several NodeClaims in one CreateFleet, whose token derives from the
// batch) cannot be replayed by a new batch: they must be terminated by
// garbage collection after its grace period, never left running.
func (c *chaosEnv) heldFates(held []ec2sim.HeldCall) string {
	c.t.Helper()
	var single, merged []string
	for _, call := range held {
		if len(call.InstanceIDs) == 1 {
			single = append(single, call.InstanceIDs...)
		} else {
			merged = append(merged, call.InstanceIDs...)
		}
	}
	adopted, terminated, orphaned := c.instanceFates(single)
	if adopted != len(single) {
		c.t.Errorf("of %d instances launched for one NodeClaim before the kill, %d adopted, %d terminated, %d running unclaimed: want all adopted (a second instance was launched)",
			len(single), adopted, terminated, orphaned)
	}
	mAdopted, mTerminated, mOrphaned := c.instanceFates(merged)
	if mOrphaned != 0 {
		c.t.Errorf("%d instances of a merged launch killed before its answer still running unclaimed", mOrphaned)
	}
	return fmt.Sprintf("heldInstances=%d adopted=%d mergedHeld=%d mergedAdopted=%d gcTerminated=%d", len(single)+len(merged), adopted+mAdopted, len(merged), mAdopted, mTerminated)
}

// TestChaosKillDuringTermination: NodeClaims are deleted (as an operator
// or a disruption would) and the controller is SIGKILLed after EC2 has
// executed their TerminateInstances and before it has seen the answer, so
// the Node and NodeClaim still carry the termination finalizer. A fresh
// process finishes the termination: NodeClaim and Node gone (finalizers
// removed), instances terminated, no other node touched, the evicted pods
// Running again elsewhere.
func TestChaosKillDuringTermination(t *testing.T) {
	runInParallel(t)
	c := newChaosProcessEnv(t, "karpx-chaos-kill-termination")
	p := c.controller("chaos-0")
	// Two pods fit a c5.xlarge: at least chaosScale()+1 NodeClaims.
	n := int32(2 * (chaosScale() + 1))
	c.scale(n, 120*time.Second)
	c.rememberHealthy()

	var claims karpv1.NodeClaimList
	if err := c.kube.List(c.ctx, &claims); err != nil {
		t.Fatal(err)
	}
	sort.Slice(claims.Items, func(i, j int) bool { return claims.Items[i].Name < claims.Items[j].Name })
	// Some NodeClaims deleted, at least one kept.
	victims := claims.Items[:min(chaosScale(), len(claims.Items)-1)]
	var names, nodes, ids []string
	for _, nc := range victims {
		names = append(names, nc.Name)
		nodes = append(nodes, nc.Status.NodeName)
		ids = append(ids, nc.Status.ProviderID[strings.LastIndexByte(nc.Status.ProviderID, '/')+1:])
		delete(c.healthyNodes, nc.Status.NodeName)
	}
	c.sim.HoldAnswers("TerminateInstances", 1)
	if _, err := c.cluster.Kubectl(c.ctx, nil, append([]string{"delete", "nodeclaim", "--wait=false"}, names...)...); err != nil {
		t.Fatal(err)
	}
	c.awaitHeld("TerminateInstances", 120*time.Second)
	killed := time.Now()
	p.kill()
	// Killed in the middle: the NodeClaims are still there, finalizer on.
	withFinalizer := 0
	for _, name := range names {
		var nc karpv1.NodeClaim
		if err := c.kube.Get(c.ctx, types.NamespacedName{Name: name}, &nc); err == nil && len(nc.Finalizers) > 0 {
			withFinalizer++
		}
	}
	if withFinalizer == 0 {
		t.Fatalf("no deleted NodeClaim left with its finalizer at the kill: the kill was not in the middle of termination")
	}
	c.sim.ReleaseHeld()
	c.controller("chaos-1")
	c.eventually(120*time.Second, "the deleted NodeClaims, their Nodes and instances gone", func(ctx context.Context) (bool, error) {
		for i := range names {
			if err := c.kube.Get(ctx, types.NamespacedName{Name: names[i]}, &karpv1.NodeClaim{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
			if err := c.kube.Get(ctx, types.NamespacedName{Name: nodes[i]}, &corev1.Node{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		_, terminated, _ := c.instanceFates(ids)
		return terminated == len(ids), nil
	})
	finished := time.Since(killed)
	c.waitRunning(n, 120*time.Second)
	recovered := time.Since(killed)
	c.scale(n+2, 120*time.Second)
	c.check("kill-during-termination", recovered, fmt.Sprintf("deleted=%d withFinalizerAtKill=%d terminationFinished=%s",
		len(names), withFinalizer, finished.Round(100*time.Millisecond)))
}

// replicaOf returns which of names a User-Agent's app id ("app/<name>")
// names, or "".
func replicaOf(userAgent string, names ...string) string {
	for _, f := range strings.Fields(userAgent) {
		for _, n := range names {
			if f == "app/"+n {
				return n
			}
		}
	}
	return ""
}

// TestChaosLeaderChange: two replicas with leader election (Lease
// karpx/karpx-leader-election); the leader is SIGKILLed in the middle of
// a scale-up, after EC2 has executed its CreateFleet and before it has
// seen the answer. The standby takes the Lease once it expires (within
// maxTakeover of the kill), finishes the scale-up,
// and the workload scales down and up again. Only one replica ever calls
// CreateFleet at a time: the simulator records each call's caller by the
// SDK's User-Agent app id. It runs alone, not beside the parallel
// scenarios: its takeover bound measures leader election's timing, which
// their CPU use would stretch.
func TestChaosLeaderChange(t *testing.T) {
	c := newChaosProcessEnv(t, "karpx-chaos-leader")
	a := c.controller("chaos-a", "--leader-elect=true")
	var holder string
	c.eventually(60*time.Second, "replica chaos-a holds the Lease", func(ctx context.Context) (bool, error) {
		holder, _ = c.lease(ctx)
		return holder != "", nil
	})
	c.controller("chaos-b", "--leader-elect=true")
	n := int32(2 * chaosScale())
	c.scale(n, 120*time.Second)
	c.rememberHealthy()

	c.sim.HoldAnswers("CreateFleet", 1)
	c.setReplicas(2 * n)
	call := c.awaitHeld("CreateFleet", 120*time.Second)
	if r := replicaOf(call.UserAgent, "chaos-a", "chaos-b"); r != "chaos-a" {
		t.Errorf("the held CreateFleet came from %q (User-Agent %q), not the leader chaos-a", r, call.UserAgent)
	}
	killed := time.Now()
	a.kill()
	_, lastRenewal := c.lease(c.ctx)
	c.sim.ReleaseHeld()
	var takeover time.Duration
	c.eventually(2*maxTakeover, "replica chaos-b takes the Lease", func(ctx context.Context) (bool, error) {
		h, _ := c.lease(ctx)
		takeover = time.Since(killed)
		return h != "" && h != holder, nil
	})
	// The Lease the dead leader last renewed expired leaseDuration later.
	afterExpiry := takeover - lastRenewal.Add(leaseDuration).Sub(killed)
	if takeover > maxTakeover {
		t.Errorf("the standby took the Lease %s after the leader's death (%s after it expired), want within %s (LeaseDuration + 2 × RetryPeriod × 2.2)",
			takeover, afterExpiry, maxTakeover)
	}
	c.waitRunning(2*n, 180*time.Second)
	recovered := time.Since(killed)
	c.scale(n, 60*time.Second)
	c.scale(3*n, 120*time.Second)

	// One caller at a time: chaos-a's calls all began before its death,
	// chaos-b's after, and no two calls of different replicas overlap.
	calls := c.sim.Calls("CreateFleet")
	per := map[string]int{}
	for i, x := range calls {
		rx := replicaOf(x.UserAgent, "chaos-a", "chaos-b")
		per[rx]++
		switch {
		case rx == "":
			t.Errorf("CreateFleet from an unknown caller %q", x.UserAgent)
		case rx == "chaos-a" && x.Start.After(killed):
			t.Errorf("chaos-a called CreateFleet after its death")
		case rx == "chaos-b" && x.Start.Before(killed):
			t.Errorf("standby chaos-b called CreateFleet at %s while chaos-a led", x.Start.Format(time.RFC3339Nano))
		}
		for _, y := range calls[i+1:] {
			if ry := replicaOf(y.UserAgent, "chaos-a", "chaos-b"); ry != rx && y.Start.Before(x.End) && x.Start.Before(y.End) {
				t.Errorf("CreateFleet calls of %s and %s overlap", rx, ry)
			}
		}
	}
	if per["chaos-b"] == 0 {
		t.Error("chaos-b never called CreateFleet: the scale-up after the kill did not need it")
	}
	c.check("leader-change", recovered, fmt.Sprintf("takeover=%s afterLeaseExpiry=%s createFleetByA=%d createFleetByB=%d",
		takeover.Round(100*time.Millisecond), afterExpiry.Round(100*time.Millisecond), per["chaos-a"], per["chaos-b"]))
}

// TestChaosCombined: during one scale-up, EC2 answers a burst of 500s and
// 503s and one of RequestLimitExceeded while neighbours take 90% of every
// bucket; the controller is SIGKILLed after EC2 executed its CreateFleet
// and before it saw the answer; and kube-apiserver is killed and
// restarted (5 s down; etcd, scheduler, controller manager and kwok keep
// running) before a fresh controller process starts. Then the faults heal and the
// workload scales up again: nothing leaked, duplicated, lost or deleted.
func TestChaosCombined(t *testing.T) {
	runInParallel(t)
	c := newChaosProcessEnv(t, "karpx-chaos-combined")
	p := c.controller("chaos-0")
	n := int32(2 * chaosScale())
	c.scale(n, 120*time.Second)
	c.rememberHealthy()

	burst := 10 * chaosScale()
	c.sim.SetThrottle(ec2sim.ThrottleConfig{Neighbours: 0.9})
	if err := c.sim.Faults().Add(
		ec2sim.FaultRule{Action: "*", Code: "InternalError", Count: burst},
		ec2sim.FaultRule{Action: "*", Code: "Unavailable", Count: burst},
		ec2sim.FaultRule{Action: "*", Code: "RequestLimitExceeded", Count: burst},
	); err != nil {
		t.Fatal(err)
	}
	c.sim.HoldAnswers("CreateFleet", 1)
	start := time.Now()
	c.setReplicas(2 * n)
	call := c.awaitHeld("CreateFleet", 180*time.Second)
	p.kill()
	c.sim.ReleaseHeld()
	c.forbiddenExcused.Store(true)
	restart := time.Now()
	if err := c.cluster.RestartAPIServer(c.ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	down := time.Since(restart)
	c.controller("chaos-1")
	c.waitRunning(2*n, 240*time.Second)
	recovered := time.Since(start)
	c.sim.Faults().Clear()
	c.sim.SetThrottle(ec2sim.ThrottleConfig{})
	c.forbiddenExcused.Store(false)
	c.scale(3*n, 180*time.Second)
	c.settle()
	fates := c.heldFates([]ec2sim.HeldCall{call})
	errs, throttled := simErrors(c.sim)
	c.check("combined", recovered, fmt.Sprintf("injected=%d errorAnswers=%d bucketThrottled=%d %s idempotentReplays=%d apiServerDown=%s",
		3*burst, errs, throttled, fates, c.sim.IdempotentReplays(), down.Round(100*time.Millisecond)))
}
