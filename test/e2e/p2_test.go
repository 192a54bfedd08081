package e2e

// Problem P2 on karpx. This file keeps karpx's side only: karpx has no
// switch to serve the instance-type catalogue before it is loaded (issue
// 29). The control, the same restart on the real Karpenter AWS provider
// against ec2sim, lives in test/upstream (TestUpstreamAWSP2-style tests).

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/hydration"
	"github.com/karpx/karpx/test/problems"
)

// p2Manifests: one pool of problems.P2InstanceType on-demand nodes, so
// that every pod of problems.P2PodCPU needs a node of its own.
func p2Manifests(cluster string) string {
	return manifests(nodeClass{Name: "default"}.yaml(cluster),
		nodePool{Name: "default", InstanceTypes: []string{problems.P2InstanceType}, CapacityTypes: []string{onDemand}}.yaml())
}

// persistentReasons are the Warning event reasons of persistent errors:
// none may appear because data was not loaded yet.
var persistentReasons = map[string]bool{
	"InstanceTypesUnavailable": true, "NodeClassNotReady": true, "FailedProvisioning": true,
	"InsufficientCapacity": true, "LaunchFailed": true,
}

// p2Observation is what a restart under slow, failing DescribeInstanceTypes
// showed before and shortly after the catalogue was hydrated.
type p2Observation struct {
	hydratedAfter   time.Duration // restart → catalogue hydrated
	notReadyReadyz  bool          // /readyz's hydration check failed before
	deleted         []string      // NodeClaims of phase 1 deleted
	persistent      []string      // persistent errors seen (events, conditions)
	describeITCalls int
}

// p2Run provisions two nodes with a first autoscaler, stops it, makes
// DescribeInstanceTypes slow and failing, creates two more pending pods and
// starts a second autoscaler. It watches until the catalogue is hydrated
// (and 5 s more), waits for the new pods to run and returns what it saw.
func p2Run(t *testing.T) p2Observation {
	e := newBareEnv(t, "karpx-p2")
	_, stop := e.runAutoscaler(e.ctx, e.log.WithName("karpx-1"), nil)
	e.apply(p2Manifests(e.name))
	if err := e.kube.Create(e.ctx, deployment("before", 2, problems.P2PodCPU, "256Mi")); err != nil {
		t.Fatal(err)
	}
	e.eventually(90*time.Second, "2 pods Running before the restart", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "before") == 2, nil
	})
	var claims karpv1.NodeClaimList
	if err := e.kube.List(e.ctx, &claims); err != nil {
		t.Fatal(err)
	}
	stop()

	// The restart: the catalogue is slow and failing, Nodes and pending
	// pods already exist.
	if err := e.sim.Faults().Add(problems.P2Faults()...); err != nil {
		t.Fatal(err)
	}
	callsBefore := e.sim.Counts()["DescribeInstanceTypes"]
	var oldEvents corev1.EventList
	if err := e.kube.List(e.ctx, &oldEvents); err != nil {
		t.Fatal(err)
	}
	seen := map[types.UID]bool{}
	for _, ev := range oldEvents.Items {
		seen[ev.UID] = true
	}
	if err := e.kube.Create(e.ctx, deployment("after", 2, problems.P2PodCPU, "256Mi")); err != nil {
		t.Fatal(err)
	}
	restart := time.Now()
	op, _ := e.runAutoscaler(e.ctx, e.log.WithName("karpx-2"), nil)

	var obs p2Observation
	var hydratedAt time.Time
	deleted := map[string]bool{}
	persistent := map[string]bool{}
	e.eventually(3*time.Minute, "catalogue hydrated (and 5 s more)", func(ctx context.Context) (bool, error) {
		if op.Hydration.Check(nil) != nil {
			obs.notReadyReadyz = true
		}
		if hydratedAt.IsZero() && op.Hydration.Hydrated(hydration.InstanceTypes) {
			hydratedAt = time.Now()
			obs.hydratedAfter = hydratedAt.Sub(restart)
		}
		for _, nc := range claims.Items {
			var cur karpv1.NodeClaim
			err := e.kube.Get(ctx, types.NamespacedName{Name: nc.Name}, &cur)
			if err != nil || !cur.DeletionTimestamp.IsZero() {
				deleted[nc.Name] = true
			}
		}
		p2Persistent(ctx, e, seen, persistent)
		return !hydratedAt.IsZero() && time.Since(hydratedAt) > 5*time.Second, nil
	})
	e.eventually(90*time.Second, "the 2 new pods Running after hydration", func(ctx context.Context) (bool, error) {
		p2Persistent(ctx, e, seen, persistent)
		return countRunning(ctx, e.kube, "after") == 2, nil
	})
	for n := range deleted {
		obs.deleted = append(obs.deleted, n)
	}
	for p := range persistent {
		obs.persistent = append(obs.persistent, p)
	}
	obs.describeITCalls = int(e.sim.Counts()["DescribeInstanceTypes"] - callsBefore)
	return obs
}

// p2Persistent adds to found the persistent errors visible now: new
// Warning events of persistentReasons, EC2NodeClass Ready=False and
// NodePool NodeClassReady=False.
func p2Persistent(ctx context.Context, e *env, seen map[types.UID]bool, found map[string]bool) {
	var events corev1.EventList
	if err := e.kube.List(ctx, &events); err == nil {
		for _, ev := range events.Items {
			if !seen[ev.UID] && ev.Type == corev1.EventTypeWarning && persistentReasons[ev.Reason] {
				found["event "+ev.Reason+" on "+ev.InvolvedObject.Kind+"/"+ev.InvolvedObject.Name+": "+ev.Message] = true
			}
		}
	}
	var class v1.EC2NodeClass
	if err := e.kube.Get(ctx, types.NamespacedName{Name: "default"}, &class); err == nil {
		if c := meta.FindStatusCondition(class.Status.Conditions, v1.ConditionTypeReady); c != nil && c.Status == metav1.ConditionFalse {
			found["EC2NodeClass Ready=False: "+c.Message] = true
		}
	}
	var pool karpv1.NodePool
	if err := e.kube.Get(ctx, types.NamespacedName{Name: "default"}, &pool); err == nil {
		if c := pool.StatusConditions().Get(karpv1.ConditionTypeNodeClassReady); c != nil && c.IsFalse() {
			found["NodePool NodeClassReady=False: "+c.Message] = true
		}
	}
}

// TestScenarioP2StartupHydration: with hydration ordering (the default), a
// restart while DescribeInstanceTypes is 20 s slow and fails 3 times
// deletes no NodeClaim, sets no persistent-error condition or event, keeps
// /readyz false until the catalogue is loaded, and then provisions the
// pending pods.
func TestScenarioP2StartupHydration(t *testing.T) {
	runInParallel(t)
	obs := p2Run(t)
	if obs.hydratedAfter < problems.P2Delay {
		t.Errorf("hydrated %.1fs after the restart, before the simulator's %s delay: the fault did not apply", obs.hydratedAfter.Seconds(), problems.P2Delay)
	}
	if obs.describeITCalls < 1+problems.P2Failures {
		t.Errorf("%d DescribeInstanceTypes calls after the restart, want at least %d (%d failures, then success)",
			obs.describeITCalls, 1+problems.P2Failures, problems.P2Failures)
	}
	if !obs.notReadyReadyz {
		t.Error("/readyz's hydration check never failed before the catalogue was loaded")
	}
	if len(obs.deleted) > 0 {
		t.Errorf("NodeClaims deleted during hydration: %v", obs.deleted)
	}
	if len(obs.persistent) > 0 {
		t.Errorf("persistent errors during hydration: %v", obs.persistent)
	}
	scenarioLogf(t, "scenario P2: catalogue hydrated %.1fs after the restart (%d DescribeInstanceTypes calls), %d NodeClaims deleted, %d persistent errors, 2 pending pods Running afterwards",
		obs.hydratedAfter.Seconds(), obs.describeITCalls, len(obs.deleted), len(obs.persistent))
}
