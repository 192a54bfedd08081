package disruption_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/controllers/disruption"
	"github.com/karpx/karpx/autoscaler/scheduling"
)

// fakeCloud serves one instance type, m5.large, and no drift.
type fakeCloud struct{ cloudprovider.CloudProvider }

var m5large = &cloudprovider.InstanceType{
	Name:        "m5.large",
	Labels:      map[string]string{corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
	Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")},
	Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("7Gi"), corev1.ResourcePods: resource.MustParse("29")},
	Offerings:   []cloudprovider.Offering{{Zone: "us-east-1a", CapacityType: "on-demand", PriceUSDPerHour: 0.096, Available: true}},
}

func (fakeCloud) GetInstanceTypes(context.Context, *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return []*cloudprovider.InstanceType{m5large}, nil
}
func (fakeCloud) IsDrifted(context.Context, *karpv1.NodeClaim) (string, error) { return "", nil }

// cluster is a fake API server holding NodePools, NodeClaims, Nodes, pods.
type cluster struct {
	t     *testing.T
	now   time.Time
	clock *clocktesting.FakeClock
	objs  []client.Object
	kube  client.Client
	opts  disruption.Options
	// cloud is fakeCloud{} unless a test sets another.
	cloud cloudprovider.CloudProvider
	// recorder holds the events of the passes (made by the first pass).
	recorder *record.FakeRecorder
}

func newCluster(t *testing.T) *cluster {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	return &cluster{t: t, now: now, clock: clocktesting.NewFakeClock(now)}
}

func (c *cluster) pool(name string, policy karpv1.ConsolidationPolicy, after time.Duration, budget string) {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Disruption.ConsolidationPolicy = policy
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration(after.String())
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: budget}}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}}
	c.objs = append(c.objs, np)
}

// node adds an Initialized NodeClaim (initialised initAgo ago) of pool with
// its m5.large Node, and returns the Node name.
func (c *cluster) node(name, pool string, initAgo time.Duration, annotations map[string]string) string {
	id := "aws:///us-east-1a/i-" + name
	// Labelled as a launched NodeClaim is (the instance type's labels,
	// zone, capacity type), which requirements drift reads.
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: pool,
		corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-east-1a", karpv1.CapacityTypeLabelKey: "on-demand"}, Annotations: annotations},
		Status: karpv1.NodeClaimStatus{ProviderID: id, NodeName: "node-" + name}}
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeInitialized)
	for i := range nc.Status.Conditions {
		nc.Status.Conditions[i].LastTransitionTime = metav1.NewTime(c.now.Add(-initAgo))
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + name, Labels: map[string]string{
		karpv1.NodePoolLabelKey: pool, corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-east-1a",
		karpv1.CapacityTypeLabelKey: "on-demand", corev1.LabelHostname: "node-" + name}},
		Spec:   corev1.NodeSpec{ProviderID: id},
		Status: corev1.NodeStatus{Allocatable: m5large.Allocatable.DeepCopy()}}
	c.objs = append(c.objs, nc, node)
	return node.Name
}

func (c *cluster) pod(name, node, cpu string, annotations map[string]string) {
	c.objs = append(c.objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations, UID: types.UID(name)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}})
}

// pass builds the controller and runs one pass.
func (c *cluster) pass() disruption.PassResult {
	c.t.Helper()
	if c.kube == nil {
		c.kube = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(c.objs...).
			WithStatusSubresource(&karpv1.NodeClaim{}).
			WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).Build()
	}
	if c.cloud == nil {
		c.cloud = fakeCloud{}
	}
	if c.recorder == nil {
		c.recorder = record.NewFakeRecorder(1000)
	}
	ctrl := disruption.New(c.kube, c.kube, c.cloud, c.recorder, c.clock, c.opts)
	res, err := ctrl.Pass(context.Background())
	if err != nil {
		c.t.Fatalf("pass: %v", err)
	}
	return res
}

// halfEmptyPair adds to pool the m5.large nodes a and b, Initialized an
// hour ago, with pods a1 (500m) and b1 (600m): either pod fits beside the
// other, so consolidation deletes one of the two when nothing holds it.
func (c *cluster) halfEmptyPair(pool string) {
	c.pod("a1", c.node("a", pool, time.Hour, nil), "500m", nil)
	c.pod("b1", c.node("b", pool, time.Hour, nil), "600m", nil)
}

// left returns how many of the NodeClaims n0 … n<count-1> exist.
func (c *cluster) left(count int) int {
	n := 0
	for i := 0; i < count; i++ {
		if c.exists(fmt.Sprintf("n%d", i)) {
			n++
		}
	}
	return n
}

func (c *cluster) exists(name string) bool {
	err := c.kube.Get(context.Background(), client.ObjectKey{Name: name}, &karpv1.NodeClaim{})
	return err == nil
}

func TestEmptinessHonoursConsolidateAfter(t *testing.T) {
	c := newCluster(t)
	c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 30*time.Second, "100%")
	c.node("old", "p", time.Minute, nil)
	c.node("young", "p", 10*time.Second, nil)
	res := c.pass()
	if c.exists("old") || !c.exists("young") {
		t.Fatalf("after one pass: old exists=%v young exists=%v (decisions %v); want old deleted, young kept until 30s after initialisation",
			c.exists("old"), c.exists("young"), res.Decisions)
	}
	c.clock.Step(25 * time.Second)
	c.pass()
	if c.exists("young") {
		t.Fatal("young still exists 35s after initialisation with consolidateAfter 30s")
	}
}

func TestEmptinessKeepsNodesWithPodsBudgetsAndDoNotDisrupt(t *testing.T) {
	for name, tc := range map[string]struct {
		budget     string
		annotation map[string]string
		pod        bool
	}{
		"a reschedulable pod":  {budget: "100%", pod: true},
		"budget of zero nodes": {budget: "0"},
		"do-not-disrupt":       {budget: "100%", annotation: map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 0, tc.budget)
			n := c.node("n", "p", time.Hour, tc.annotation)
			if tc.pod {
				c.pod("web", n, "100m", nil)
			}
			res := c.pass()
			if !c.exists("n") {
				t.Fatalf("node deleted (%v), want kept", res.Decisions)
			}
		})
	}
}

func TestEmptinessBudgetLimitsNodesPerPass(t *testing.T) {
	c := newCluster(t)
	c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 0, "2")
	for i := 0; i < 5; i++ {
		c.node(fmt.Sprintf("n%d", i), "p", time.Hour, nil)
	}
	c.pass()
	if left := c.left(5); left != 3 {
		t.Fatalf("%d of 5 empty nodes left after one pass with a budget of 2 nodes, want 3", left)
	}
}

func TestConsolidationDeletesANodeWhosePodsFitElsewhere(t *testing.T) {
	c := newCluster(t)
	c.pool("p", karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, 0, "100%")
	c.halfEmptyPair("p")
	res := c.pass()
	if c.exists("a") == c.exists("b") {
		t.Fatalf("decisions %v: want exactly one of two half-empty m5.large nodes deleted", res.Decisions)
	}
}

func TestConsolidationRespectsUnmodelledConstraintsAndWhenEmpty(t *testing.T) {
	c := newCluster(t)
	c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 0, "100%")
	c.halfEmptyPair("p")
	res := c.pass()
	if !c.exists("a") || !c.exists("b") {
		t.Fatalf("decisions %v: a WhenEmpty NodePool must not consolidate nodes with pods", res.Decisions)
	}
}

func TestNodeNominatedForPendingPodsIsNotEmpty(t *testing.T) {
	c := newCluster(t)
	c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 0, "100%")
	c.node("n", "p", time.Hour, nil)
	c.pod("pending", "", "500m", nil)
	res := c.pass()
	if !c.exists("n") {
		t.Fatalf("decisions %v: a node a pending pod will land on was deleted as empty", res.Decisions)
	}
}

func TestDriftedNodesAreReplaced(t *testing.T) {
	for name, mutate := range map[string]func(*karpv1.NodeClaim){
		"NodePool template changed": func(nc *karpv1.NodeClaim) {
			nc.Annotations = map[string]string{karpv1.NodePoolHashAnnotationKey: "launched-from-an-older-template",
				karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion}
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 0, "100%")
			c.pool("other", karpv1.ConsolidationPolicyWhenEmpty, 0, "100%")
			n := c.node("old", "p", 3*time.Hour, nil)
			c.node("busy", "other", 3*time.Hour, nil)
			c.pod("web", n, "1500m", nil)
			c.pod("filler", "node-busy", "1500m", nil)
			mutate(c.objs[len(c.objs)-6].(*karpv1.NodeClaim))
			res := c.pass()
			var got karpv1.NodeClaim
			if err := c.kube.Get(context.Background(), client.ObjectKey{Name: "old"}, &got); err != nil {
				t.Fatal(err)
			}
			reps := got.Annotations[disruption.ReplacementsAnnotationKey]
			if reps == "" || len(res.Decisions) != 1 {
				t.Fatalf("decisions %v, replacements %q: want the node replaced first (its pod fits nowhere else)", res.Decisions, reps)
			}
			var rep karpv1.NodeClaim
			if err := c.kube.Get(context.Background(), client.ObjectKey{Name: reps}, &rep); err != nil {
				// The fake client does not generate names; the
				// replacement is created with GenerateName only.
				var list karpv1.NodeClaimList
				if err := c.kube.List(context.Background(), &list); err != nil || len(list.Items) != 3 {
					t.Fatalf("want 3 NodeClaims (old, busy, replacement), got %d: %v", len(list.Items), err)
				}
			}
			if !c.exists("old") {
				t.Fatal("the old node was deleted before its replacement was Initialized")
			}
		})
	}
}

// TestReplacementMinValuesRelaxedAnnotation: a replacement NodeClaim
// carries karpenter.sh/nodeclaim-min-values-relaxed as a provisioned one
// does (Karpenter plans both with the same scheduler): "false" when no
// minValues was lowered, "true" when BestEffort lowered one; under Strict an
// unmeetable minValues plans no replacement, so the drifted node stays.
func TestReplacementMinValuesRelaxedAnnotation(t *testing.T) {
	for _, tt := range []struct {
		name      string
		minValues *int // on the NodePool's instance-type In [m5.large]
		policy    scheduling.MinValuesPolicy
		want      string // "" when no replacement may be created
	}{
		{name: "no minValues", want: "false"},
		{name: "minValues met", minValues: new(1), policy: scheduling.MinValuesPolicyStrict, want: "false"},
		{name: "minValues 2 of 1 type, BestEffort", minValues: new(2), policy: scheduling.MinValuesPolicyBestEffort, want: "true"},
		{name: "minValues 2 of 1 type, Strict", minValues: new(2), policy: scheduling.MinValuesPolicyStrict},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t)
			c.opts.MinValuesPolicy = tt.policy
			c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 0, "100%")
			c.objs[0].(*karpv1.NodePool).Spec.Template.Spec.Requirements[0].MinValues = tt.minValues
			n := c.node("old", "p", 3*time.Hour, map[string]string{karpv1.NodePoolHashAnnotationKey: "launched-from-an-older-template",
				karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion})
			c.pod("web", n, "1500m", nil)
			c.pass()
			var list karpv1.NodeClaimList
			if err := c.kube.List(context.Background(), &list); err != nil {
				t.Fatal(err)
			}
			var replacements []karpv1.NodeClaim
			for _, nc := range list.Items {
				if nc.Annotations[disruption.ReplacementForAnnotationKey] != "" {
					replacements = append(replacements, nc)
				}
			}
			if tt.want == "" {
				if len(replacements) != 0 {
					t.Fatalf("%d replacements created, want none: minValues cannot be met under Strict", len(replacements))
				}
				return
			}
			if len(replacements) != 1 {
				t.Fatalf("%d replacements created, want 1 for the drifted node", len(replacements))
			}
			if got, ok := replacements[0].Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey]; !ok || got != tt.want {
				t.Errorf("replacement annotation %s = %q (set %t), want %q", karpv1.NodeClaimMinValuesRelaxedAnnotationKey, got, ok, tt.want)
			}
		})
	}
}

// TestConsolidationLeavesRoomForPendingPods: room a pending pod will take is
// not promised to a candidate's pods too. Without the pending pod, a's pod
// fits on b and a is deleted; with it, b's room is the pending pod's and
// nothing is disrupted (the loop of deleting a node whose pods then need a
// new one).
func TestConsolidationLeavesRoomForPendingPods(t *testing.T) {
	for _, pending := range []bool{false, true} {
		c := newCluster(t)
		c.pool("p", karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, 0, "100%")
		c.halfEmptyPair("p")
		if pending {
			c.pod("waiting", "", "1300m", nil)
		}
		res := c.pass()
		deleted := !c.exists("a") || !c.exists("b")
		if deleted == pending {
			t.Errorf("pending pod %v: decisions %v; want a node deleted only without the pending pod", pending, res.Decisions)
		}
	}
}

// TestOrphanedDisruptedTaintIsRemoved: a controller killed between tainting
// a candidate and deleting it (or recording its replacements) leaves
// karpenter.sh/disrupted on a healthy node; the next pass removes it. A
// taint that a replacement-first command still holds stays.
func TestOrphanedDisruptedTaintIsRemoved(t *testing.T) {
	for name, tc := range map[string]struct {
		held      bool
		wantTaint bool
	}{
		"orphaned by a stopped controller":    {held: false, wantTaint: false},
		"held by a replacement-first command": {held: true, wantTaint: true},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 0, "100%")
			var annotations map[string]string
			if tc.held {
				annotations = map[string]string{disruption.ReplacementsAnnotationKey: "new"}
				c.objs = append(c.objs, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "new", CreationTimestamp: metav1.NewTime(c.now),
					Labels: map[string]string{karpv1.NodePoolLabelKey: "p"}}})
			}
			n := c.node("tainted", "p", time.Hour, annotations)
			c.pod("web", n, "100m", nil)
			for _, o := range c.objs {
				if node, ok := o.(*corev1.Node); ok && node.Name == n {
					node.Spec.Taints = append(node.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
				}
			}
			c.pass()
			if has := c.tainted(n); has != tc.wantTaint {
				t.Fatalf("after a pass the Node has karpenter.sh/disrupted=%v, want %v", has, tc.wantTaint)
			}
			if !c.exists("tainted") {
				t.Fatal("the NodeClaim of a node with a pod was deleted")
			}
		})
	}
}

// TestConsolidationKeepsNodesWhosePendingPodsAreStillArriving is the P1
// end-to-end failure made deterministic: three m5.large nodes have just
// initialised, one for each 1500m pod (each needs a node of its own), and
// kube-scheduler has bound only a1 yet. b1 and c1 will take b and c: a1
// fits nowhere else, so deleting a leaves a pod without room and costs a
// relaunch. With equal requests the scheduler packs a1 (moved) first by
// name, so a simulation that only counts the new nodes holding moved pods
// sees a1 fit on b and calls a "pods fit on other nodes". As in
// Karpenter's consolidation, every new node the simulation needs, pending
// pods' ones included, counts.
func TestConsolidationKeepsNodesWhosePendingPodsAreStillArriving(t *testing.T) {
	for _, bound := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d of 3 bound", bound), func(t *testing.T) {
			c := newCluster(t)
			c.pool("p", karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, 0, "100%")
			nodes := []string{c.node("a", "p", time.Second, nil), c.node("b", "p", time.Second, nil), c.node("c", "p", time.Second, nil)}
			for i, name := range []string{"a1", "b1", "c1"} {
				node := ""
				if i < bound {
					node = nodes[i]
				}
				c.pod(name, node, "1500m", nil)
			}
			res := c.pass()
			for _, n := range []string{"a", "b", "c"} {
				if !c.exists(n) {
					t.Errorf("decisions %v: node %s deleted while pods it is needed for are pending", res.Decisions, n)
				}
			}
			if len(res.Decisions) > 0 {
				t.Errorf("decisions %v, want none", res.Decisions)
			}
		})
	}
}

// TestNominationHonoursInitializationGrace: a node initialised 10 min ago
// still carries Cilium's agent taint and a pending pod is expected on it.
// With --initialization-grace-window=20m (Options.InitializationGrace) the
// taint is within the grace window, as provisioning sees it, so the node is
// nominated and kept; with the default window (5 min, the control) the
// taint counts, the pod fits nowhere, and the node goes as empty.
func TestNominationHonoursInitializationGrace(t *testing.T) {
	for _, tt := range []struct {
		name   string
		window time.Duration
		kept   bool
	}{
		{"window 20m", 20 * time.Minute, true},
		{"default window", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t)
			c.opts.InitializationGrace = tt.window
			c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, 0, "100%")
			node := c.node("n", "p", 10*time.Minute, nil)
			for _, o := range c.objs {
				if n, ok := o.(*corev1.Node); ok && n.Name == node {
					n.Spec.Taints = []corev1.Taint{{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
				}
			}
			c.pod("pending", "", "500m", nil)
			res := c.pass()
			if got := c.exists("n"); got != tt.kept {
				t.Errorf("decisions %v: node kept %v, want %v", res.Decisions, got, tt.kept)
			}
		})
	}
}

// TestExpiryIsForceful: a NodeClaim older than its spec.expireAfter is
// deleted in one pass, as Karpenter v1's expiration controller does,
// although its NodePool's budget allows no disruption, a pod on it has
// karpenter.sh/do-not-disrupt and nothing else could hold that pod (no
// replacement first); one not yet expired stays.
func TestExpiryIsForceful(t *testing.T) {
	c := newCluster(t)
	c.pool("p", karpv1.ConsolidationPolicyWhenEmpty, time.Hour, "0")
	n := c.node("old", "p", 3*time.Hour, map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"})
	c.pod("web", n, "1500m", map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"})
	c.node("young", "p", 3*time.Hour, nil)
	for _, o := range c.objs {
		if nc, ok := o.(*karpv1.NodeClaim); ok {
			nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration("2h")
			nc.CreationTimestamp = metav1.NewTime(c.now.Add(-3 * time.Hour))
			if nc.Name == "young" {
				nc.CreationTimestamp = metav1.NewTime(c.now.Add(-time.Hour))
			}
		}
	}
	c.pass()
	if c.exists("old") || !c.exists("young") {
		t.Fatalf("after one pass: old exists=%v young exists=%v; want the expired one deleted whatever holds it, the other kept",
			c.exists("old"), c.exists("young"))
	}
	var list karpv1.NodeClaimList
	if err := c.kube.List(context.Background(), &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("NodeClaims after the pass: %d (%v); want only young (no replacement launched first)", len(list.Items), err)
	}
}
