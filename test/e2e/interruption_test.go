package e2e

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/ec2sim"
)

// spotNotice is the shortened spot interruption notice of the
// interruption scenarios (EC2's is 2 minutes): the simulator reclaims an
// instance 45 s after its warning, and back-dates the warning's event time
// so that, as on EC2, event time + 2 min is the reclaim.
const spotNotice = 45 * time.Second

// interruptionQueue is the simulated interruption queue's name.
const interruptionQueue = "karpx-e2e-interruption"

// spotManifest: a spot-only NodePool of 4-vCPU types that never
// consolidates, so only interruptions move pods.
var spotManifest = nodePool{Name: "spot", Disruption: neverConsolidate, Labels: map[string]string{"pool": "spot"},
	CapacityTypes: []string{"spot"},
	InstanceTypes: []string{"m5.xlarge", "m5a.xlarge", "m6i.xlarge", "m6a.xlarge", "m7i.xlarge", "c5.xlarge", "c6i.xlarge", "c6a.xlarge", "r5.xlarge", "r6i.xlarge"},
}.yaml()

// TestScenarioSpotInterruption: 3 spot nodes run 30 pods (10 each) behind
// a PodDisruptionBudget of maxUnavailable 3; EC2 warns all three at once.
// With --interruption-queue, every pod must be Running on replacement
// capacity before the instances are reclaimed, none deleted without the
// Eviction API, and no replacement on an interrupted (type, zone).
func TestScenarioSpotInterruption(t *testing.T) {
	runInParallel(t)
	runSpotInterruption(t, true)
}

// TestScenarioSpotInterruptionControl: the same without the queue flag
// (karpx before issue 20): the pods die with the instances.
func TestScenarioSpotInterruptionControl(t *testing.T) {
	runInParallel(t)
	runSpotInterruption(t, false)
}

// podDeletions watches the pods of app and counts deletions, and those
// whose last state does not carry the DisruptionTarget condition that the
// Eviction API sets (reason EvictionByEvictionAPI): deleted without
// eviction.
type podDeletions struct {
	mu                 sync.Mutex
	deleted, unevicted int
}

func (d *podDeletions) watch(ctx context.Context, e *env, app string) {
	wc, err := client.NewWithWatch(e.cluster.RESTConfig, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace("default"), client.MatchingLabels{"app": app})
	if err != nil {
		e.t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Deleted {
				continue
			}
			evicted := false
			for _, c := range pod.Status.Conditions {
				evicted = evicted || (c.Type == corev1.DisruptionTarget && c.Reason == "EvictionByEvictionAPI")
			}
			d.mu.Lock()
			d.deleted++
			if !evicted {
				d.unevicted++
			}
			d.mu.Unlock()
		}
	}()
}

func (d *podDeletions) counts() (deleted, unevicted int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.deleted, d.unevicted
}

func runSpotInterruption(t *testing.T, withQueue bool) {
	e := newEnvWith(t, "karpx-spot", envOptions{
		sim: func(c *ec2sim.Config) {
			c.InterruptionQueue = interruptionQueue
			c.SpotInterruptionNotice = spotNotice
		},
		tweak: func(o *operator.Options) {
			if withQueue {
				o.InterruptionQueue = interruptionQueue
			}
		},
	})
	e.apply(ec2NodeClassYAML("spot", e.name), spotManifest)
	// 380m: ten pods fill a 4-vCPU node (3,920m allocatable), eleven do not.
	web := deployment("spot-web", 30, "380m", "64Mi")
	web.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "spot"}
	if err := e.kube.Create(e.ctx, web); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "spot-web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spot-web"}}}}
	if err := e.kube.Create(e.ctx, pdb); err != nil {
		t.Fatal(err)
	}
	e.eventually(180*time.Second, "30 pods Running on 3 Initialized spot NodeClaims", func(ctx context.Context) (bool, error) {
		ncs := e.nodeClaims()
		init := 0
		for _, nc := range ncs {
			if nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
				init++
			}
		}
		return countRunning(ctx, e.kube, "spot-web") == 30 && len(ncs) == 3 && init == 3, nil
	})
	e.eventually(30*time.Second, "the PDB observed", func(ctx context.Context) (bool, error) {
		var got policyv1.PodDisruptionBudget
		err := e.kube.Get(ctx, client.ObjectKeyFromObject(pdb), &got)
		return err == nil && got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy == 30, err
	})
	interruptedNodes := map[string]bool{}
	interruptedOfferings := map[string]bool{}
	var ids []string
	for _, nc := range e.nodeClaims() {
		var node corev1.Node
		if err := e.kube.Get(e.ctx, client.ObjectKey{Name: nc.Status.NodeName}, &node); err != nil {
			t.Fatal(err)
		}
		if node.Labels[karpv1.CapacityTypeLabelKey] != "spot" {
			t.Fatalf("Node %s is %s, want spot", node.Name, node.Labels[karpv1.CapacityTypeLabelKey])
		}
		interruptedNodes[node.Name] = true
		interruptedOfferings[node.Labels[corev1.LabelInstanceTypeStable]+"/"+node.Labels[corev1.LabelTopologyZone]] = true
		ids = append(ids, instance.InstanceID(nc.Status.ProviderID))
	}
	deletions := &podDeletions{}
	deletions.watch(e.ctx, e, "spot-web")
	received0 := counterValue(t, "karpenter_interruption_received_messages_total", "spot_interrupted")

	events, err := e.sim.Interrupt(ec2sim.InterruptionSpot, ids...)
	if err != nil {
		t.Fatal(err)
	}
	var reclaim time.Time
	for _, ev := range events {
		at, err := time.Parse(time.RFC3339, ev.Time)
		if err != nil {
			t.Fatal(err)
		}
		if r := at.Add(2 * time.Minute); r.After(reclaim) {
			reclaim = r
		}
	}
	t.Logf("interrupted %v (offerings %v); reclaim at %s, in %.1fs", ids, sortedKeys(interruptedOfferings), reclaim.Format(time.RFC3339), time.Until(reclaim).Seconds())

	// Sample the pods until the reclaim: when were all 30 Running on
	// other nodes, and how many were still on the doomed ones.
	var allMovedAt time.Time
	onDoomed := -1
	for time.Until(reclaim) > 250*time.Millisecond {
		var pods corev1.PodList
		if err := e.kube.List(e.ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "spot-web"}); err == nil {
			moved, doomed := 0, 0
			for _, p := range pods.Items {
				switch {
				case interruptedNodes[p.Spec.NodeName]:
					doomed++
				case p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() && podReady(&p):
					moved++
				}
			}
			onDoomed = doomed
			if moved == 30 && doomed == 0 {
				if allMovedAt.IsZero() {
					allMovedAt = time.Now()
				}
			} else {
				allMovedAt = time.Time{}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	deleted, unevicted := deletions.counts()

	if !withQueue {
		scenarioLogf(t, "scenario spot-interruption control: notice %s, %d of 30 pods still on the 3 instances when EC2 reclaimed them (died with them); %d pod deletions before the reclaim, %d without eviction",
			spotNotice, onDoomed, deleted, unevicted)
		if onDoomed == 0 {
			t.Fatal("without the interruption queue no pod should have left the interrupted nodes before the reclaim")
		}
		return
	}
	if allMovedAt.IsZero() {
		t.Fatalf("not all 30 pods Running on replacement capacity before the reclaim: %d still on interrupted nodes", onDoomed)
	}
	margin := reclaim.Sub(allMovedAt)
	var replacements []string
	bad := false
	for _, nc := range e.nodeClaims() {
		var node corev1.Node
		if err := e.kube.Get(e.ctx, client.ObjectKey{Name: nc.Status.NodeName}, &node); err != nil || interruptedNodes[node.Name] {
			continue
		}
		off := node.Labels[corev1.LabelInstanceTypeStable] + "/" + node.Labels[corev1.LabelTopologyZone] + "/" + node.Labels[karpv1.CapacityTypeLabelKey]
		replacements = append(replacements, off)
		if interruptedOfferings[node.Labels[corev1.LabelInstanceTypeStable]+"/"+node.Labels[corev1.LabelTopologyZone]] {
			bad = true
		}
	}
	sort.Strings(replacements)
	scenarioLogf(t, "scenario spot-interruption: notice %s, last of 30 pods Running on replacement capacity %.1fs before the reclaim; 0 pods on the reclaimed instances; %d pod deletions, %d without eviction; interrupted %v, replacements %v",
		spotNotice, margin.Seconds(), deleted, unevicted, sortedKeys(interruptedOfferings), replacements)
	if unevicted != 0 {
		t.Errorf("%d pods deleted without the Eviction API", unevicted)
	}
	if bad || len(replacements) == 0 {
		t.Errorf("replacements %v: want none on an interrupted (type, zone) %v", replacements, sortedKeys(interruptedOfferings))
	}
	if got := counterValue(t, "karpenter_interruption_received_messages_total", "spot_interrupted") - received0; got < 3 {
		t.Errorf("karpenter_interruption_received_messages_total{message_type=spot_interrupted} grew by %v, want at least 3 (one per warned instance)", got)
	}
	// The interrupted NodeClaims are gone, and every message was deleted.
	e.eventually(60*time.Second, "interrupted NodeClaims gone and the queue empty", func(ctx context.Context) (bool, error) {
		for _, nc := range e.nodeClaims() {
			if interruptedNodes[nc.Status.NodeName] {
				return false, nil
			}
		}
		left, err := e.sim.QueueMessages(interruptionQueue)
		return err == nil && len(left) == 0, err
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// counterValue returns the in-process autoscaler's counter name (with the
// label message_type=label when label is not empty), 0 when absent.
func counterValue(t *testing.T, name, label string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if label == "" || (l.GetName() == "message_type" && l.GetValue() == label) {
					return m.GetCounter().GetValue()
				}
			}
			if label == "" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
