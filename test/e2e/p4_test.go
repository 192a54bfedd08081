package e2e

// Problem P4 on karpx. This file keeps karpx's side only: karpx has no
// switch to turn nomination or the grace window off (issue 29). The
// control, the same GPU cluster on the real Karpenter AWS provider against
// ec2sim, lives in test/upstream (TestUpstreamAWSP4-style tests). The
// provisioner's unit tests check nomination's TTLs and reservations on
// their own (autoscaler/controllers/provisioning: nomination_test.go).

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/ec2sim"
	"github.com/karpx/karpx/test/problems"
)

// p4Manifest: an EC2NodeClass whose instances carry problems.P4Behavior
// (the field report's node start, times divided by 5) and a GPU NodePool
// whose requirements select NVIDIA types with problems.P4GPUCount GPU
// from the real catalogue, and which does not declare Cilium's startup
// taint. One pod per node, so the first plan needs exactly
// problems.P4Pods NodeClaims.
func p4Manifest(cluster string) string {
	return manifests(nodeClass{Name: "gpu", Tags: map[string]string{ec2sim.BehaviorTagKey: problems.P4Behavior}}.yaml(cluster),
		nodePool{Name: "gpu", Disruption: "{consolidationPolicy: WhenEmpty, consolidateAfter: 5m}",
			Taints:        "[{key: nvidia.com/gpu, effect: NoSchedule}]",
			Requirements:  []string{inRequirement("karpenter.k8s.aws/instance-gpu-manufacturer", "nvidia"), inRequirement("karpenter.k8s.aws/instance-gpu-count", strconv.Quote(problems.P4GPUCount))},
			CapacityTypes: []string{onDemand}}.yaml())
}

// p4Observer records, from watches, every NodeClaim ever created or
// deleted and what each Node went through.
type p4Observer struct {
	mu      sync.Mutex
	created map[string]time.Time // NodeClaim → first seen
	deleted map[string]bool      // NodeClaims with a deletionTimestamp or deleted
	nodes   map[string]*p4NodeSeen
	// podsCreated is when the Deployment was created.
	podsCreated time.Time
}

type p4NodeSeen struct {
	created                      time.Time
	cilium, noGPU, notReady, gpu bool
	readyAfterNotReady           bool
}

func (o *p4Observer) claims() (created, deleted []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for n := range o.created {
		created = append(created, n)
	}
	for n := range o.deleted {
		deleted = append(deleted, n)
	}
	sort.Strings(created)
	sort.Strings(deleted)
	return created, deleted
}

// observe watches NodeClaims and Nodes until the test's context ends.
func (o *p4Observer) observe(t *testing.T, e *env) {
	t.Helper()
	wc, err := client.NewWithWatch(e.cluster.RESTConfig, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := wc.Watch(e.ctx, &karpv1.NodeClaimList{})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := wc.Watch(e.ctx, &corev1.NodeList{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(claims.Stop)
	t.Cleanup(nodes.Stop)
	go func() {
		for ev := range claims.ResultChan() {
			nc, ok := ev.Object.(*karpv1.NodeClaim)
			if !ok {
				continue
			}
			o.mu.Lock()
			if _, seen := o.created[nc.Name]; !seen {
				o.created[nc.Name] = time.Now()
			}
			if ev.Type == watch.Deleted || !nc.DeletionTimestamp.IsZero() {
				o.deleted[nc.Name] = true
			}
			o.mu.Unlock()
		}
	}()
	go func() {
		for ev := range nodes.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			o.mu.Lock()
			s := o.nodes[n.Name]
			if s == nil {
				s = &p4NodeSeen{created: n.CreationTimestamp.Time}
				o.nodes[n.Name] = s
			}
			for _, tn := range n.Spec.Taints {
				s.cilium = s.cilium || tn.Key == problems.P4CiliumTaint
			}
			if q, ok := n.Status.Allocatable["nvidia.com/gpu"]; ok && !q.IsZero() {
				s.gpu = true
			} else {
				s.noGPU = true
			}
			for _, c := range n.Status.Conditions {
				if c.Type != corev1.NodeReady {
					continue
				}
				if c.Status == corev1.ConditionFalse {
					s.notReady = true
				} else if c.Status == corev1.ConditionTrue && s.notReady {
					s.readyAfterNotReady = true
				}
			}
			o.mu.Unlock()
		}
	}()
}

// runP4 starts the scenario and returns the environment, the observer
// and a PATH with a freshly built kubectl-karpx.
func runP4(t *testing.T) (*env, *p4Observer, string) {
	e := newEnvWithLog(t, "karpx-p4", nil, nil)
	path := buildPlugin(t, e.root)
	obs := &p4Observer{created: map[string]time.Time{}, deleted: map[string]bool{}, nodes: map[string]*p4NodeSeen{}}
	obs.observe(t, e)
	e.apply(p4Manifest(e.name))
	obs.podsCreated = time.Now()
	if err := e.kube.Create(e.ctx, gpuDeployment("cuda", problems.P4Pods)); err != nil {
		t.Fatal(err)
	}
	nudgeWhileInitialising(t, e, obs)
	return e, obs, path
}

// nudgeWhileInitialising waits until every node of the first plan has
// registered with the Cilium taint and without nvidia.com/gpu, then
// updates the pending pods (problems.P4NudgePending): so the run is sure
// to plan while the nodes initialise (12 s before the taint goes), as a
// busy cluster does all the time, instead of depending on when
// kube-scheduler happens to update the pods.
func nudgeWhileInitialising(t *testing.T, e *env, obs *p4Observer) {
	t.Helper()
	e.eventually(90*time.Second, "every first-plan node registered with the Cilium taint and without nvidia.com/gpu", func(context.Context) (bool, error) {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		n := 0
		for _, s := range obs.nodes {
			if s.cilium && s.noGPU && !s.gpu {
				n++
			}
		}
		return n >= problems.P4Pods, nil
	})
	if err := problems.P4NudgePending(e.ctx, e.kube, "cuda"); err != nil {
		t.Fatal(err)
	}
}

// gpuDeployment is replicas pods that each need one nvidia.com/gpu and
// tolerate the GPU NodePool's taint.
func gpuDeployment(name string, replicas int32) *appsv1.Deployment {
	d := deployment(name, replicas, "500m", "1Gi")
	c := &d.Spec.Template.Spec.Containers[0]
	c.Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
	c.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	return d
}

// TestScenarioP4NoDuplicateLaunch: GPU nodes that register with an
// undeclared Cilium taint, advertise nvidia.com/gpu late and go NotReady
// for a moment while initialising. Pods nominated to them wait, and the
// grace window keeps the scheduler from seeing them as unfit: exactly the
// NodeClaims of the first plan are launched, every pod runs and no
// NodeClaim is deleted. Each node is checked to have gone through every
// scripted step, so the test cannot pass without the scenario happening.
func TestScenarioP4NoDuplicateLaunch(t *testing.T) {
	runInParallel(t)
	e, obs, path := runP4(t)
	start := obs.podsCreated
	// The nodes are initialising (nvidia.com/gpu comes 14 s after
	// registration): kubectl karpx nodeclaims shows what they wait for
	// and the pod nominated to each.
	out := e.kubectlWithPath(path, "karpx", "nodeclaims", "--nodepool", "gpu")
	t.Logf("kubectl karpx nodeclaims:\n%s", out)
	rows := strings.Split(strings.TrimSpace(out), "\n")[1:]
	if len(rows) != problems.P4Pods {
		t.Errorf("kubectl karpx nodeclaims shows %d NodeClaims, want %d", len(rows), problems.P4Pods)
	}
	for _, row := range rows {
		if f := strings.Fields(row); len(f) < 8 || f[6] != "1" || !strings.Contains(row, "nvidia.com/gpu not allocatable yet") {
			t.Errorf("kubectl karpx nodeclaims row %q: want 1 nominated pod and nvidia.com/gpu as the blocker", row)
		}
	}
	e.eventually(150*time.Second, "all pods Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "cuda") == problems.P4Pods, nil
	})
	running := time.Since(start)

	// Wait until every node has gone through its NotReady window and is
	// Ready again, then keep watching for two batch windows and a bit.
	e.eventually(90*time.Second, "every node through its NotReady window and Ready again", func(context.Context) (bool, error) {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		done := 0
		for _, s := range obs.nodes {
			if s.readyAfterNotReady {
				done++
			}
		}
		return done >= problems.P4Pods, nil
	})
	time.Sleep(15 * time.Second)

	created, deleted := obs.claims()
	if got := countRunning(e.ctx, e.kube, "cuda"); got != problems.P4Pods {
		t.Errorf("%d of %d pods Running after the NotReady windows", got, problems.P4Pods)
	}
	obs.mu.Lock()
	for name, s := range obs.nodes {
		if !s.cilium || !s.noGPU || !s.gpu || !s.notReady || !s.readyAfterNotReady {
			t.Errorf("node %s did not go through the scenario: cilium taint %v, without GPU %v, GPU later %v, NotReady %v, Ready again %v",
				name, s.cilium, s.noGPU, s.gpu, s.notReady, s.readyAfterNotReady)
		}
	}
	nodes := len(obs.nodes)
	obs.mu.Unlock()
	if len(created) != problems.P4Pods {
		t.Errorf("%d NodeClaims created (%v), want %d: the first plan's", len(created), created, problems.P4Pods)
	}
	if len(deleted) != 0 {
		t.Errorf("NodeClaims deleted: %v", deleted)
	}
	scenarioLogf(t, "scenario P4: %d NodeClaims for %d GPU pods (first plan %d), %d deleted, %d Nodes each with the Cilium taint, nvidia.com/gpu late and NotReady 4s; all pods Running %.1fs after creation",
		len(created), problems.P4Pods, problems.P4Pods, len(deleted), nodes, running.Seconds())
}
