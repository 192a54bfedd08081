package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/ec2sim"
)

// The chaos suite: on the real control plane with the simulator, a
// workload scales up while one fault is injected, then scales up again
// once it is healed. After each, the invariants of chaosCheck hold: no
// leaked instance, no NodeClaim with two instances, no healthy node
// deleted, no NodeClaim lost, every pod Running. Each test logs one line
// "chaos <fault>: …" with its figures. `make chaos-short` (CI runs it
// after `make test`) runs the short version (chaosPods pods); `make chaos`
// sets KARPX_CHAOS_LONG=1 for five times more pods and faults.

// chaosScale is 5 under `make chaos` (KARPX_CHAOS_LONG=1), else 1.
func chaosScale() int {
	if os.Getenv("KARPX_CHAOS_LONG") != "" {
		return 5
	}
	return 1
}

// chaosManifests is the chaos tests' EC2NodeClass and NodePool for
// cluster: on-demand m5.large, m5.xlarge or c5.xlarge nodes for the pods
// labelled tier: chaos.
func chaosManifests(cluster string) string {
	return manifests(nodeClass{Name: "chaos"}.yaml(cluster), nodePool{Name: "chaos",
		// Consolidation off: these faults must not cost a healthy node, and a
		// cheaper packing (two m5.large onto one c5.xlarge) would be counted as one.
		Disruption: neverConsolidate, Labels: map[string]string{"tier": "chaos"},
		InstanceTypes: []string{"m5.large", "m5.xlarge", "c5.xlarge"}, CapacityTypes: []string{onDemand}}.yaml())
}

// chaosEnv is an environment for one fault: a NodePool "chaos" and a
// Deployment "chaos" of 1500m pods, each needing a node of its own on
// m5.large.
type chaosEnv struct {
	*env
	healthyNodes map[string]string // node name → UID, Ready before the fault
	// kubeconfig is ServiceAccount karpx/karpx's, for controller processes
	// (newChaosProcessEnv).
	kubeconfig string
}

// newChaosEnv is a chaos environment with the autoscaler in-process.
func newChaosEnv(t *testing.T, name string) *chaosEnv {
	return chaosWorkload(newEnvWith(t, name, envOptions{tweak: func(o *operator.Options) {
		o.GCPeriod = chaosGCPeriod
		o.GCGrace = chaosGCGrace
	}}))
}

// The garbage collector's period and grace in the chaos suite: short, so
// that an instance a fault leaves unclaimed is terminated within the
// check's wait.
const (
	chaosGCPeriod = 2 * time.Second
	chaosGCGrace  = 10 * time.Second
)

// chaosWorkload applies the chaos NodePool, EC2NodeClass and Deployment
// (no replicas yet) to e.
func chaosWorkload(e *env) *chaosEnv {
	t := e.t
	e.apply(chaosManifests(e.name))
	dep := deployment("chaos", 0, "1500m", "512Mi")
	dep.Spec.Template.Spec.NodeSelector = map[string]string{"tier": "chaos"}
	if err := e.kube.Create(e.ctx, dep); err != nil {
		t.Fatal(err)
	}
	return &chaosEnv{env: e}
}

// scale sets the Deployment's replicas and waits for them all to be
// Running.
func (c *chaosEnv) scale(replicas int32, within time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	c.setReplicas(replicas)
	c.waitRunning(replicas, within)
	return time.Since(start)
}

// setReplicas sets the Deployment's replicas.
func (c *chaosEnv) setReplicas(replicas int32) {
	c.t.Helper()
	if _, err := c.cluster.Kubectl(c.ctx, nil, "scale", "deployment/chaos", fmt.Sprintf("--replicas=%d", replicas)); err != nil {
		c.t.Fatal(err)
	}
}

// waitRunning waits until replicas chaos pods are Running.
// On a timeout it fails the test naming the pods that are not Running.
func (c *chaosEnv) waitRunning(replicas int32, within time.Duration) {
	c.t.Helper()
	err := wait.PollUntilContextTimeout(c.ctx, 500*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		return countRunning(ctx, c.kube, "chaos") == int(replicas), nil
	})
	if err == nil {
		return
	}
	var pods corev1.PodList
	_ = c.kube.List(c.ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "chaos"})
	var stuck []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() {
			continue
		}
		why := ""
		for _, cond := range p.Status.Conditions {
			if cond.Status != corev1.ConditionTrue && cond.Message != "" {
				why = cond.Message
			}
		}
		stuck = append(stuck, fmt.Sprintf("%s phase=%s node=%q nominated=%q deleting=%v %s",
			p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.NominatedNodeName, !p.DeletionTimestamp.IsZero(), why))
	}
	// And the nodes with a taint, which keep pods away, with their
	// NodeClaim (by providerID) if any.
	var claims karpv1.NodeClaimList
	_ = c.kube.List(c.ctx, &claims)
	claimOf := map[string]string{}
	for _, nc := range claims.Items {
		claimOf[nc.Status.ProviderID] = nc.Name
	}
	var nodes corev1.NodeList
	_ = c.kube.List(c.ctx, &nodes)
	for _, n := range nodes.Items {
		if len(n.Spec.Taints) > 0 {
			stuck = append(stuck, fmt.Sprintf("node %s taints=%v nodeClaim=%q providerID=%s created=%s",
				n.Name, n.Spec.Taints, claimOf[n.Spec.ProviderID], n.Spec.ProviderID, n.CreationTimestamp.Format(time.RFC3339)))
		}
	}
	c.t.Fatalf("%d chaos pods Running: not true within %s (%v); not Running:\n%s", replicas, within, err, strings.Join(stuck, "\n"))
}

// rememberHealthy records the Ready nodes, which no fault may delete.
func (c *chaosEnv) rememberHealthy() {
	var nodes corev1.NodeList
	if err := c.kube.List(c.ctx, &nodes); err != nil {
		c.t.Fatal(err)
	}
	c.healthyNodes = map[string]string{}
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				c.healthyNodes[n.Name] = string(n.UID)
			}
		}
	}
}

// chaosFigures are the invariants' counts.
type chaosFigures struct {
	instances, nodeClaims, leaked, duplicates, healthyDeleted, nodeClaimsLost int
}

func (f chaosFigures) String() string {
	return fmt.Sprintf("instances=%d nodeClaims=%d leaked=%d duplicates=%d healthyDeleted=%d nodeClaimsLost=%d",
		f.instances, f.nodeClaims, f.leaked, f.duplicates, f.healthyDeleted, f.nodeClaimsLost)
}

// figures counts, now: live instances no NodeClaim claims (leaked), extra
// live instances tagged with one NodeClaim (duplicates), nodes Ready before
// the fault that are gone or replaced (healthyDeleted), NodeClaims whose
// instance is gone (nodeClaimsLost).
func (c *chaosEnv) figures() chaosFigures {
	var f chaosFigures
	var claims karpv1.NodeClaimList
	if err := c.kube.List(c.ctx, &claims); err != nil {
		c.t.Fatal(err)
	}
	f.nodeClaims = len(claims.Items)
	claimed := map[string]bool{}
	for _, nc := range claims.Items {
		if id := nc.Status.ProviderID; id != "" {
			claimed[id[strings.LastIndexByte(id, '/')+1:]] = true
		}
	}
	live := map[string]bool{}
	perClaim := map[string]int{}
	for _, in := range c.sim.Instances() {
		if in.State != "pending" && in.State != "running" {
			continue
		}
		f.instances++
		live[in.ID] = true
		if !claimed[in.ID] {
			f.leaked++
		}
		if name := in.Tags[instance.TagNodeClaim]; name != "" {
			perClaim[name]++
		}
	}
	for _, n := range perClaim {
		f.duplicates += n - 1
	}
	for id := range claimed {
		if !live[id] {
			f.nodeClaimsLost++
		}
	}
	var nodes corev1.NodeList
	if err := c.kube.List(c.ctx, &nodes); err != nil {
		c.t.Fatal(err)
	}
	now := map[string]string{}
	for _, n := range nodes.Items {
		now[n.Name] = string(n.UID)
	}
	for name, uid := range c.healthyNodes {
		if now[name] != uid {
			f.healthyDeleted++
		}
	}
	return f
}

// check waits until no instance is leaked (garbage collection terminates
// an unclaimed instance after its grace period) and the counts are stable,
// then fails the test on any broken invariant and logs the chaos line.
func (c *chaosEnv) check(fault string, recovered time.Duration, extra string) {
	c.t.Helper()
	f := c.settle()
	if extra != "" {
		extra = " " + extra
	}
	if f.leaked != 0 || f.duplicates != 0 || f.healthyDeleted != 0 || f.nodeClaimsLost != 0 {
		c.t.Errorf("invariants broken after %s: %s", fault, f)
	}
	scenarioLogf(c.t, "chaos %s: pods=%d running=%d recovered=%s %s%s", fault, c.replicas(), countRunning(c.ctx, c.kube, "chaos"),
		recovered.Round(100*time.Millisecond), f, extra)
}

// settle waits up to 60 s until no instance is leaked and no NodeClaim
// lost (garbage collection terminates an unclaimed instance after its
// grace period) and returns the figures then.
func (c *chaosEnv) settle() chaosFigures {
	var f chaosFigures
	_ = wait.PollUntilContextTimeout(c.ctx, time.Second, 60*time.Second, true, func(context.Context) (bool, error) {
		f = c.figures()
		return f.leaked == 0 && f.nodeClaimsLost == 0, nil
	})
	return f
}

func (c *chaosEnv) replicas() int {
	var pods corev1.PodList
	if err := c.kube.List(c.ctx, &pods); err != nil {
		return -1
	}
	n := 0
	for _, p := range pods.Items {
		if p.Labels["app"] == "chaos" && p.DeletionTimestamp.IsZero() {
			n++
		}
	}
	return n
}

// runChaos scales to base pods, injects the fault, scales up by more pods
// while it lasts, heals it, scales up once more, and checks the invariants.
func runChaos(t *testing.T, fault string, inject func(c *chaosEnv), heal func(c *chaosEnv), extra func(c *chaosEnv) string) {
	runInParallel(t)
	c := newChaosEnv(t, "karpx-chaos-"+strings.ToLower(fault))
	n := int32(2 * chaosScale())
	c.scale(n, 90*time.Second)
	c.rememberHealthy()
	inject(c)
	recovered := c.scale(2*n, 180*time.Second)
	heal(c)
	c.scale(3*n, 120*time.Second)
	more := ""
	if extra != nil {
		more = extra(c)
	}
	c.check(fault, recovered, more)
}

// simErrors sums the simulator's error answers.
func simErrors(sim *ec2sim.Simulator) (errs, throttled int64) {
	for _, st := range sim.Stats() {
		errs += st.Errors
		throttled += st.Throttled
	}
	return errs, throttled
}

// TestChaosEC2ServerErrors: a burst of 500 InternalError and 503
// Unavailable answers on every action.
func TestChaosEC2ServerErrors(t *testing.T) {
	burst := 20 * chaosScale()
	runChaos(t, "ec2-5xx", func(c *chaosEnv) {
		if err := c.sim.Faults().Add(
			ec2sim.FaultRule{Action: "*", Code: "InternalError", Count: burst},
			ec2sim.FaultRule{Action: "*", Code: "Unavailable", Count: burst},
		); err != nil {
			t.Fatal(err)
		}
	}, func(c *chaosEnv) { c.sim.Faults().Clear() }, func(c *chaosEnv) string {
		errs, _ := simErrors(c.sim)
		return fmt.Sprintf("injected=%d errorAnswers=%d", 2*burst, errs)
	})
}

// TestChaosThrottlingBurst: the account's other clients take 95% of every
// EC2 bucket while the workload scales up, and a burst of
// RequestLimitExceeded answers on every action.
func TestChaosThrottlingBurst(t *testing.T) {
	burst := 20 * chaosScale()
	runChaos(t, "throttling", func(c *chaosEnv) {
		c.sim.SetThrottle(ec2sim.ThrottleConfig{Neighbours: 0.95})
		if err := c.sim.Faults().Add(ec2sim.FaultRule{Action: "*", Code: "RequestLimitExceeded", Count: burst}); err != nil {
			t.Fatal(err)
		}
	}, func(c *chaosEnv) {
		c.sim.Faults().Clear()
		c.sim.SetThrottle(ec2sim.ThrottleConfig{})
	}, func(c *chaosEnv) string {
		errs, throttled := simErrors(c.sim)
		return fmt.Sprintf("injected=%d errorAnswers=%d bucketThrottled=%d", burst, errs, throttled)
	})
}

// TestChaosInsufficientCapacity: the preferred offering, the instance type
// the first scale-up used, has no capacity in any zone; launches fall back
// to the next offering, and the ICE is remembered (UnavailableOfferingsTTL),
// so CreateFleet does not ask for it again and again.
func TestChaosInsufficientCapacity(t *testing.T) {
	var fleets0 int64
	var preferred string
	runChaos(t, "insufficient-capacity", func(c *chaosEnv) {
		fleets0 = c.sim.Stats()["CreateFleet"].Requests
		for _, in := range c.sim.Instances() {
			if in.State == "running" {
				preferred = in.InstanceType
			}
		}
		if err := c.sim.Faults().AddCapacity(ec2sim.CapacityFault{InstanceType: preferred}); err != nil {
			t.Fatal(err)
		}
	}, func(c *chaosEnv) {
		// Still without the preferred type: the ICE's TTL outlives the test.
	}, func(c *chaosEnv) string {
		fallback := 0
		for _, in := range c.sim.Instances() {
			if in.State == "running" && in.InstanceType != preferred {
				fallback++
			}
		}
		fleets := c.sim.Stats()["CreateFleet"].Requests - fleets0
		if fleets > int64(3*c.replicas()) {
			t.Errorf("%d CreateFleet calls for %d pods: the ICE is not remembered", fleets, c.replicas())
		}
		if fallback == 0 {
			t.Errorf("no instance of a fallback offering (preferred %s has no capacity)", preferred)
		}
		return fmt.Sprintf("preferred=%s createFleetAfterICE=%d fallbackInstances=%d", preferred, fleets, fallback)
	})
}

// TestChaosLostLaunchAnswers: CreateFleet launches but its answer is lost
// (a 500 after the fact); the SDK's retry carries the same ClientToken
// (derived from the NodeClaim) and EC2 answers with the instance already
// launched: no NodeClaim gets two instances.
func TestChaosLostLaunchAnswers(t *testing.T) {
	lost := 3 * chaosScale()
	runChaos(t, "lost-launch-answers", func(c *chaosEnv) {
		c.sim.LoseAnswers("CreateFleet", lost)
	}, func(c *chaosEnv) { c.sim.LoseAnswers("CreateFleet", 0) }, func(c *chaosEnv) string {
		if c.sim.IdempotentReplays() == 0 {
			t.Error("no CreateFleet was answered from its ClientToken: the fault did not happen")
		}
		return fmt.Sprintf("lost=%d idempotentReplays=%d", lost, c.sim.IdempotentReplays())
	})
}

// TestChaosControlPlaneRestart: the whole control plane (kube-apiserver,
// etcd, kube-controller-manager, kube-scheduler, kwok) stops for 5 s and
// starts again while the workload scales up; the autoscaler's clients see
// connection errors and must resume without losing or duplicating
// anything.
func TestChaosControlPlaneRestart(t *testing.T) {
	var down time.Duration
	runChaos(t, "control-plane-restart", func(c *chaosEnv) {
		start := time.Now()
		// Until the restarted API server's RBAC has synced, it refuses
		// the autoscaler's requests as Forbidden.
		c.forbiddenExcused.Store(true)
		if err := c.cluster.Restart(c.ctx, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		down = time.Since(start)
	}, func(c *chaosEnv) { c.forbiddenExcused.Store(false) }, func(*chaosEnv) string {
		return fmt.Sprintf("apiServerDown=%s", down.Round(100*time.Millisecond))
	})
}
