package scheduling_test

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/catalog"
)

func solve(t *testing.T, in scheduling.Input) scheduling.Result {
	t.Helper()
	res := scheduling.Solve(in)
	checkInvariants(t, in, res)
	return res
}

func pool(np *karpv1.NodePool) scheduling.NodePoolInput {
	return scheduling.NodePoolInput{NodePool: np, InstanceTypes: allTypes()}
}

func placedPods(res scheduling.Result) int {
	n := 0
	for _, p := range res.NewNodeClaims {
		n += len(p.Pods)
	}
	return n
}

// TestGeneralPurpose packs 30 pods of 500m/512Mi onto Karpenter's
// general-purpose NodePool and checks the plans against a brute-force
// search of the catalogue.
func TestGeneralPurpose(t *testing.T) {
	in := scheduling.Input{Pods: pods(30, "web", "500m", "512Mi"), NodePools: []scheduling.NodePoolInput{pool(generalPurpose())}}
	res := solve(t, in)

	if len(res.Unschedulable) != 0 || placedPods(res) != 30 {
		t.Fatalf("placed %d pods, unschedulable %v; want all 30 placed", placedPods(res), res.Unschedulable)
	}
	for n, p := range res.NewNodeClaims {
		for _, it := range p.InstanceTypes {
			gen, _ := strconv.Atoi(it.Labels["karpenter.k8s.aws/instance-generation"])
			if cat := it.Labels[catalog.LabelInstanceCategory]; !strings.Contains("cmr", cat) || len(cat) != 1 || gen <= 2 || it.Labels[catalog.LabelArch] != "amd64" {
				t.Errorf("plan %d offers %s (category %s, generation %d, arch %s), outside the NodePool", n, it.Name, cat, gen, it.Labels[catalog.LabelArch])
			}
		}
		if got := valuesOf(p, karpv1.CapacityTypeLabelKey); !reflect.DeepEqual(got, []string{"on-demand"}) {
			t.Errorf("plan %d capacity types %v, want [on-demand]", n, got)
		}
		// Brute force: the cheapest catalogue type that the NodePool allows
		// and that fits the plan's requests must cost what the plan says.
		best := math.Inf(1)
		for _, c := range catalog.All() {
			gen, _ := strconv.Atoi(c.Labels["karpenter.k8s.aws/instance-generation"])
			cat := c.Labels[catalog.LabelInstanceCategory]
			if c.OnDemandPriceUSDPerHour == nil || c.Arch() != "amd64" || gen <= 2 || (cat != "c" && cat != "m" && cat != "r") {
				continue
			}
			fits := true
			for name, q := range p.Requests {
				if have := c.Allocatable[name]; have.Cmp(q) < 0 {
					fits = false
				}
			}
			if fits && *c.OnDemandPriceUSDPerHour < best {
				best = *c.OnDemandPriceUSDPerHour
			}
		}
		if p.PriceUSDPerHour != best {
			t.Errorf("plan %d costs %.4f/h, the cheapest fitting general-purpose type costs %.4f/h", n, p.PriceUSDPerHour, best)
		}
		if len(p.InstanceTypes) != scheduling.MaxInstanceTypes {
			t.Errorf("plan %d has %d instance types, want the cap %d (hundreds fit)", n, len(p.InstanceTypes), scheduling.MaxInstanceTypes)
		}
	}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	withInit := func(cpu string, sidecar bool) podOption {
		return func(p *corev1.Pod) {
			c := corev1.Container{Name: "init" + cpu, Resources: corev1.ResourceRequirements{Requests: resources("cpu", cpu)}}
			if sidecar {
				c.RestartPolicy = &always
			}
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		}
	}
	overhead := func(p *corev1.Pod) { p.Spec.Overhead = resources("cpu", "250m") }
	tests := []struct {
		name    string
		pod     *corev1.Pod
		wantCPU string
	}{
		{"containers only", pod("a", "1", "1Gi"), "1"},
		{"larger init container wins", pod("a", "1", "1Gi", withInit("3", false)), "3"},
		{"smaller init container ignored", pod("a", "1", "1Gi", withInit("500m", false)), "1"},
		{"sidecar adds to containers", pod("a", "1", "1Gi", withInit("500m", true)), "1500m"},
		{"pod overhead added", pod("a", "1", "1Gi", overhead), "1250m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := solve(t, scheduling.Input{Pods: []*corev1.Pod{tt.pod}, NodePools: []scheduling.NodePoolInput{pool(generalPurpose())}})
			if len(res.NewNodeClaims) != 1 {
				t.Fatalf("got %d plans, want 1 (unschedulable: %v)", len(res.NewNodeClaims), res.Unschedulable)
			}
			got := res.NewNodeClaims[0].Requests
			if cpu := got[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse(tt.wantCPU)) != 0 {
				t.Errorf("cpu request %s, want %s", cpu.String(), tt.wantCPU)
			}
			if pods := got[corev1.ResourcePods]; pods.Value() != 1 {
				t.Errorf("pods request %s, want 1", pods.String())
			}
		})
	}
}

func TestRequirementsAndAffinity(t *testing.T) {
	spotAndOD := generalPurpose()
	spotAndOD.Spec.Template.Spec.Requirements[2] = req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand", "spot")
	labelled := generalPurpose()
	labelled.Spec.Template.Labels = map[string]string{"team": "ml"}
	tests := []struct {
		name      string
		pool      *karpv1.NodePool
		pod       *corev1.Pod
		wantErr   string   // substring of the unschedulable reason; "" = placed
		wantZones []string // zone requirement of the plan, when placed
	}{
		{name: "arch arm64 on amd64-only pool", pool: generalPurpose(),
			pod:     pod("p", "1", "1Gi", nodeSelector(corev1.LabelArchStable, "arm64")),
			wantErr: `no instance type in NodePool "general-purpose" satisfies nodeSelector kubernetes.io/arch=arm64 (the NodePool allows kubernetes.io/arch In [amd64])`},
		{name: "arch s390x", pool: generalPurpose(),
			pod:     pod("p", "1", "1Gi", nodeSelector(corev1.LabelArchStable, "s390x")),
			wantErr: `no instance type in NodePool "general-purpose" satisfies nodeSelector kubernetes.io/arch=s390x`},
		{name: "beta arch label is normalised", pool: generalPurpose(),
			pod: pod("p", "1", "1Gi", nodeSelector("beta.kubernetes.io/arch", "amd64")), wantZones: zones},
		{name: "zone affinity narrows the plan", pool: generalPurpose(),
			pod:       pod("p", "1", "1Gi", affinity([]corev1.NodeSelectorRequirement{expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1b")})),
			wantZones: []string{"us-east-1b"}},
		{name: "zone NotIn narrows the plan", pool: generalPurpose(),
			pod:       pod("p", "1", "1Gi", affinity([]corev1.NodeSelectorRequirement{expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpNotIn, "us-east-1a")})),
			wantZones: []string{"us-east-1b", "us-east-1c"}},
		{name: "unknown zone", pool: generalPurpose(),
			pod:     pod("p", "1", "1Gi", nodeSelector(corev1.LabelTopologyZone, "us-west-2a")),
			wantErr: `no available offering in NodePool "general-purpose" satisfies nodeSelector topology.kubernetes.io/zone=us-west-2a`},
		{name: "second affinity term used when the first cannot match", pool: generalPurpose(),
			pod: pod("p", "1", "1Gi", affinity(
				[]corev1.NodeSelectorRequirement{expr(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64")},
				[]corev1.NodeSelectorRequirement{expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1c")})),
			wantZones: []string{"us-east-1c"}},
		{name: "no affinity term matches", pool: generalPurpose(),
			pod: pod("p", "1", "1Gi", affinity(
				[]corev1.NodeSelectorRequirement{expr(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64")},
				[]corev1.NodeSelectorRequirement{expr(catalog.LabelInstanceCategory, corev1.NodeSelectorOpIn, "g")})),
			wantErr: `none of the pod's 2 node affinity terms fits NodePool "general-purpose": term 1: no instance type`},
		{name: "Gt on instance cpu", pool: generalPurpose(),
			pod:       pod("p", "1", "1Gi", affinity([]corev1.NodeSelectorRequirement{expr(catalog.LabelInstanceCPU, corev1.NodeSelectorOpGt, "31")})),
			wantZones: zones},
		{name: "spot is cheaper and allowed", pool: spotAndOD,
			pod: pod("p", "1", "1Gi"), wantZones: zones},
		{name: "pod asks for spot on an on-demand pool", pool: generalPurpose(),
			pod:     pod("p", "1", "1Gi", nodeSelector(karpv1.CapacityTypeLabelKey, "spot")),
			wantErr: `no available offering in NodePool "general-purpose" satisfies nodeSelector karpenter.sh/capacity-type=spot (the NodePool allows karpenter.sh/capacity-type In [on-demand])`},
		{name: "template label satisfies a custom nodeSelector", pool: labelled,
			pod: pod("p", "1", "1Gi", nodeSelector("team", "ml")), wantZones: zones},
		{name: "template label conflicts", pool: labelled,
			pod:     pod("p", "1", "1Gi", nodeSelector("team", "web")),
			wantErr: `incompatible with NodePool "general-purpose": nodeSelector team=web conflicts with NodePool label team=ml`},
		{name: "undefined custom label", pool: generalPurpose(),
			pod:     pod("p", "1", "1Gi", nodeSelector("team", "ml")),
			wantErr: `nodeSelector team=ml needs label team, which the NodePool neither sets`},
		{name: "nodepool label", pool: generalPurpose(),
			pod: pod("p", "1", "1Gi", nodeSelector(karpv1.NodePoolLabelKey, "general-purpose")), wantZones: zones},
		{name: "too large for any type", pool: generalPurpose(),
			pod:     pod("p", "1000", "1Gi"),
			wantErr: `no compatible instance type in NodePool "general-purpose" has room for cpu=1k`},
		{name: "GPU on a c/m/r pool", pool: generalPurpose(),
			pod: pod("p", "1", "1Gi", func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
			}),
			wantErr: `has room for nvidia.com/gpu=1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := solve(t, scheduling.Input{Pods: []*corev1.Pod{tt.pod}, NodePools: []scheduling.NodePoolInput{pool(tt.pool)}})
			if tt.wantErr != "" {
				err := res.Unschedulable[tt.pod.UID]
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("unschedulable reason %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if len(res.NewNodeClaims) != 1 {
				t.Fatalf("got %d plans (unschedulable: %v), want 1", len(res.NewNodeClaims), res.Unschedulable)
			}
			p := res.NewNodeClaims[0]
			if got := valuesOf(p, corev1.LabelTopologyZone); !reflect.DeepEqual(got, tt.wantZones) {
				t.Errorf("zone requirement %v, want %v", got, tt.wantZones)
			}
		})
	}
}

func TestSpotPricing(t *testing.T) {
	np := generalPurpose()
	np.Spec.Template.Spec.Requirements[2] = req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand", "spot")
	res := solve(t, scheduling.Input{Pods: pods(4, "p", "1", "1Gi"), NodePools: []scheduling.NodePoolInput{pool(np)}})
	p := res.NewNodeClaims[0]
	od := math.Inf(1)
	for _, o := range p.InstanceTypes[0].Offerings {
		if o.CapacityType == karpv1.CapacityTypeOnDemand {
			od = math.Min(od, o.PriceUSDPerHour)
		}
	}
	if want := od * spotFraction[0]; math.Abs(p.PriceUSDPerHour-want) > 1e-9 {
		t.Errorf("price %.5f, want the us-east-1a spot price %.5f", p.PriceUSDPerHour, want)
	}
	if got := valuesOf(p, karpv1.CapacityTypeLabelKey); !reflect.DeepEqual(got, []string{"on-demand", "spot"}) {
		t.Errorf("capacity types %v, want both", got)
	}
}

func TestUnavailableOfferings(t *testing.T) {
	types := withOfferings(allTypes(), func(o cloudprovider.Offering) cloudprovider.Offering {
		o.Available = o.Zone != "us-east-1a"
		return o
	})
	res := solve(t, scheduling.Input{Pods: pods(3, "p", "1", "1Gi"), NodePools: []scheduling.NodePoolInput{{NodePool: generalPurpose(), InstanceTypes: types}}})
	if got := valuesOf(res.NewNodeClaims[0], corev1.LabelTopologyZone); !reflect.DeepEqual(got, []string{"us-east-1b", "us-east-1c"}) {
		t.Errorf("zones %v, want us-east-1a left out", got)
	}
	none := withOfferings(allTypes(), func(o cloudprovider.Offering) cloudprovider.Offering { o.Available = false; return o })
	in := scheduling.Input{Pods: pods(1, "p", "1", "1Gi"), NodePools: []scheduling.NodePoolInput{{NodePool: generalPurpose(), InstanceTypes: none}}}
	res = solve(t, in)
	if err := res.Unschedulable[in.Pods[0].UID]; err == nil || !strings.Contains(err.Error(), "has an available offering") {
		t.Errorf("reason %v, want it to say no offering is available", err)
	}
}

func TestTaints(t *testing.T) {
	gpuTaint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name          string
		taints        []corev1.Taint
		startupTaints []corev1.Taint
		pod           *corev1.Pod
		wantErr       string
	}{
		{name: "untolerated taint", taints: []corev1.Taint{gpuTaint}, pod: pod("p", "1", "1Gi"),
			wantErr: `incompatible with NodePool "general-purpose": taint dedicated=gpu:NoSchedule not tolerated`},
		{name: "tolerated taint", taints: []corev1.Taint{gpuTaint}, pod: pod("p", "1", "1Gi", toleration("dedicated", "gpu", corev1.TaintEffectNoSchedule))},
		{name: "wrong value", taints: []corev1.Taint{gpuTaint}, pod: pod("p", "1", "1Gi", toleration("dedicated", "cpu", corev1.TaintEffectNoSchedule)),
			wantErr: "taint dedicated=gpu:NoSchedule not tolerated"},
		{name: "NoExecute blocks", taints: []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoExecute}}, pod: pod("p", "1", "1Gi"),
			wantErr: "taint x:NoExecute not tolerated"},
		{name: "PreferNoSchedule does not block", taints: []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}}, pod: pod("p", "1", "1Gi")},
		{name: "startup taints never block", startupTaints: []corev1.Taint{{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoExecute}}, pod: pod("p", "1", "1Gi")},
		{name: "unregistered taint never blocks", taints: []corev1.Taint{karpv1.UnregisteredNoExecuteTaint}, pod: pod("p", "1", "1Gi")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := generalPurpose()
			np.Spec.Template.Spec.Taints, np.Spec.Template.Spec.StartupTaints = tt.taints, tt.startupTaints
			res := solve(t, scheduling.Input{Pods: []*corev1.Pod{tt.pod}, NodePools: []scheduling.NodePoolInput{pool(np)}})
			err := res.Unschedulable[tt.pod.UID]
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unschedulable: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("reason %v, want it to contain %q", err, tt.wantErr)
			case tt.wantErr == "":
				nc := res.NewNodeClaims[0].NodeClaim()
				if !reflect.DeepEqual(nc.Spec.Taints, tt.taints) || !reflect.DeepEqual(nc.Spec.StartupTaints, tt.startupTaints) {
					t.Errorf("NodeClaim taints %v / startup %v, want the template's", nc.Spec.Taints, nc.Spec.StartupTaints)
				}
			}
		})
	}
}

func TestInFlight(t *testing.T) {
	amd := map[string]string{corev1.LabelArchStable: "amd64", corev1.LabelTopologyZone: "us-east-1a"}
	tests := []struct {
		name       string
		nodes      []scheduling.ExistingNode
		pods       []*corev1.Pod
		wantOnNode map[string]int
		wantPlans  int
	}{
		{name: "absorbs all pods",
			nodes:      []scheduling.ExistingNode{{Name: "n1", Labels: amd, Available: resources("cpu", "4", "memory", "8Gi", "pods", "10")}},
			pods:       pods(3, "p", "1", "1Gi"),
			wantOnNode: map[string]int{"n1": 3}},
		{name: "overflow makes a plan",
			nodes:      []scheduling.ExistingNode{{Name: "n1", Labels: amd, Available: resources("cpu", "2", "memory", "8Gi", "pods", "10")}},
			pods:       pods(3, "p", "1", "1Gi"),
			wantOnNode: map[string]int{"n1": 2}, wantPlans: 1},
		{name: "pods resource counts",
			nodes:      []scheduling.ExistingNode{{Name: "n1", Labels: amd, Available: resources("cpu", "4", "memory", "8Gi", "pods", "1")}},
			pods:       pods(3, "p", "1", "1Gi"),
			wantOnNode: map[string]int{"n1": 1}, wantPlans: 1},
		{name: "nodeSelector mismatch",
			nodes:     []scheduling.ExistingNode{{Name: "n1", Labels: amd, Available: resources("cpu", "4", "memory", "8Gi", "pods", "10")}},
			pods:      pods(2, "p", "1", "1Gi", nodeSelector(corev1.LabelTopologyZone, "us-east-1b")),
			wantPlans: 1},
		{name: "untolerated taint",
			nodes:     []scheduling.ExistingNode{{Name: "n1", Labels: amd, Taints: []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoSchedule}}, Available: resources("cpu", "4", "memory", "8Gi", "pods", "10")}},
			pods:      pods(2, "p", "1", "1Gi"),
			wantPlans: 1},
		// The caller leaves karpenter.sh/unregistered out for a node it
		// will register; one that keeps it is nobody's (the kube-scheduler
		// refuses it too).
		{name: "unregistered taint blocks",
			nodes:     []scheduling.ExistingNode{{Name: "n1", Labels: amd, Taints: []corev1.Taint{karpv1.UnregisteredNoExecuteTaint}, Available: resources("cpu", "4", "memory", "8Gi", "pods", "10")}},
			pods:      pods(2, "p", "1", "1Gi"),
			wantPlans: 1},
		{name: "first fit in name order",
			nodes: []scheduling.ExistingNode{
				{Name: "n2", Labels: amd, Available: resources("cpu", "4", "memory", "8Gi", "pods", "10")},
				{Name: "n1", Labels: amd, Available: resources("cpu", "1", "memory", "8Gi", "pods", "10")},
			},
			pods:       pods(3, "p", "1", "1Gi"),
			wantOnNode: map[string]int{"n1": 1, "n2": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := solve(t, scheduling.Input{Pods: tt.pods, ExistingNodes: tt.nodes, NodePools: []scheduling.NodePoolInput{pool(generalPurpose())}})
			got := map[string]int{}
			for n, ps := range res.ExistingPlacements {
				got[n] = len(ps)
			}
			if tt.wantOnNode == nil {
				tt.wantOnNode = map[string]int{}
			}
			if !reflect.DeepEqual(got, tt.wantOnNode) {
				t.Errorf("placements %v, want %v", got, tt.wantOnNode)
			}
			if len(res.NewNodeClaims) != tt.wantPlans {
				t.Errorf("%d new plans, want %d", len(res.NewNodeClaims), tt.wantPlans)
			}
		})
	}
}

func TestWeights(t *testing.T) {
	weighted := func(name string, w int32, arch string) *karpv1.NodePool {
		np := nodePool(name, req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, arch))
		if w > 0 {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand"))
			np.Spec.Weight = &w
		}
		return np
	}
	tests := []struct {
		name  string
		pools []*karpv1.NodePool
		pod   *corev1.Pod
		want  string
	}{
		{"higher weight wins", []*karpv1.NodePool{weighted("a", 10, "amd64"), weighted("b", 50, "amd64")}, pod("p", "1", "1Gi"), "b"},
		{"weight beats name", []*karpv1.NodePool{weighted("a", 0, "amd64"), weighted("z", 1, "amd64")}, pod("p", "1", "1Gi"), "z"},
		{"equal weights: name order", []*karpv1.NodePool{weighted("b", 10, "amd64"), weighted("a", 10, "amd64")}, pod("p", "1", "1Gi"), "a"},
		{"incompatible heavy pool skipped", []*karpv1.NodePool{weighted("a", 10, "arm64"), weighted("b", 50, "amd64")}, pod("p", "1", "1Gi", nodeSelector(corev1.LabelArchStable, "arm64")), "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := scheduling.Input{Pods: []*corev1.Pod{tt.pod}}
			for _, np := range tt.pools {
				in.NodePools = append(in.NodePools, pool(np))
			}
			res := solve(t, in)
			if len(res.NewNodeClaims) != 1 {
				t.Fatalf("%d plans (unschedulable %v), want 1", len(res.NewNodeClaims), res.Unschedulable)
			}
			if got := res.NewNodeClaims[0].NodePool.Name; got != tt.want {
				t.Errorf("NodePool %s, want %s", got, tt.want)
			}
		})
	}
}

func TestUnschedulableNamesEveryNodePool(t *testing.T) {
	taint := generalPurpose()
	taint.Name = "gpu"
	taint.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	in := scheduling.Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi", nodeSelector(corev1.LabelArchStable, "s390x"))}, NodePools: []scheduling.NodePoolInput{pool(generalPurpose()), pool(taint)}}
	err := solve(t, in).Unschedulable[in.Pods[0].UID]
	for _, want := range []string{`NodePool "general-purpose" satisfies nodeSelector kubernetes.io/arch=s390x`, `NodePool "gpu": taint dedicated=gpu:NoSchedule not tolerated`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("reason %v, want it to contain %q", err, want)
		}
	}
	res := solve(t, scheduling.Input{Pods: in.Pods})
	if err := res.Unschedulable[in.Pods[0].UID]; err == nil || !strings.Contains(err.Error(), "there are no NodePools") {
		t.Errorf("without NodePools: %v", err)
	}
}

func TestLimits(t *testing.T) {
	cpuOf := func(it *cloudprovider.InstanceType) int64 { q := it.Capacity[corev1.ResourceCPU]; return q.Value() }
	t.Run("cpu limit caps new capacity", func(t *testing.T) {
		in := scheduling.Input{Pods: pods(20, "p", "1", "1Gi"), NodePools: []scheduling.NodePoolInput{{NodePool: generalPurpose(), InstanceTypes: allTypes(), Remaining: resources("cpu", "8")}}}
		res := solve(t, in)
		var total int64
		for _, p := range res.NewNodeClaims {
			total += cpuOf(p.InstanceTypes[0])
			for _, it := range p.InstanceTypes {
				if cpuOf(it) > 8 {
					t.Errorf("plan offers %s with %d vCPU, above the 8 remaining", it.Name, cpuOf(it))
				}
			}
		}
		if total > 8 {
			t.Errorf("plans' cheapest types total %d vCPU, limit leaves 8", total)
		}
		if placedPods(res) == 0 || len(res.Unschedulable) == 0 {
			t.Fatalf("placed %d, unschedulable %d: want some of each", placedPods(res), len(res.Unschedulable))
		}
		for _, err := range res.Unschedulable {
			if !strings.Contains(err.Error(), `NodePool "general-purpose" limits reached`) {
				t.Errorf("reason %v, want limits reached", err)
			}
		}
	})
	t.Run("overflow goes to the next NodePool", func(t *testing.T) {
		limited := generalPurpose()
		w := int32(10)
		limited.Spec.Weight = &w
		fallback := generalPurpose()
		fallback.Name = "fallback"
		in := scheduling.Input{Pods: pods(20, "p", "1", "1Gi"), NodePools: []scheduling.NodePoolInput{
			{NodePool: limited, InstanceTypes: allTypes(), Remaining: resources("cpu", "8")}, pool(fallback)}}
		res := solve(t, in)
		by := map[string]int{}
		for _, p := range res.NewNodeClaims {
			by[p.NodePool.Name] += len(p.Pods)
		}
		if len(res.Unschedulable) != 0 || by["general-purpose"] == 0 || by["fallback"] == 0 {
			t.Errorf("pods per NodePool %v, unschedulable %v: want both used, none left", by, res.Unschedulable)
		}
	})
	t.Run("node count limit", func(t *testing.T) {
		// One pod per zone: three nodes needed, two allowed.
		var ps []*corev1.Pod
		for i, z := range zones {
			ps = append(ps, pod(fmt.Sprintf("p%d", i), "1", "1Gi", nodeSelector(corev1.LabelTopologyZone, z)))
		}
		in := scheduling.Input{Pods: ps, NodePools: []scheduling.NodePoolInput{{NodePool: generalPurpose(), InstanceTypes: allTypes(), Remaining: resources("nodes", "2")}}}
		res := solve(t, in)
		if len(res.NewNodeClaims) != 2 || len(res.Unschedulable) != 1 {
			t.Errorf("%d plans, %d unschedulable; want 2 and 1", len(res.NewNodeClaims), len(res.Unschedulable))
		}
	})
	t.Run("exhausted", func(t *testing.T) {
		in := scheduling.Input{Pods: pods(1, "p", "1", "1Gi"), NodePools: []scheduling.NodePoolInput{{NodePool: generalPurpose(), InstanceTypes: allTypes(), Remaining: resources("cpu", "0")}}}
		err := solve(t, in).Unschedulable[in.Pods[0].UID]
		if err == nil || !strings.Contains(err.Error(), "limits reached") || !strings.Contains(err.Error(), "raise spec.limits") {
			t.Errorf("reason %v, want limits reached with the fix", err)
		}
	})
}

func TestMinValues(t *testing.T) {
	withMin := func(key string, n int, values ...string) *karpv1.NodePool {
		np := generalPurpose()
		op := corev1.NodeSelectorOpExists
		if len(values) > 0 {
			op = corev1.NodeSelectorOpIn
		}
		r := req(key, op, values...)
		r.MinValues = &n
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, r)
		return np
	}
	t.Run("families kept despite the cap", func(t *testing.T) {
		// 40 families would easily be lost to the 60-type cap if the
		// cheapest 60 were kept blindly: most are sizes of few families.
		np := withMin(catalog.LabelInstanceFamily, 40)
		res := solve(t, scheduling.Input{Pods: pods(10, "p", "1", "1Gi"), NodePools: []scheduling.NodePoolInput{pool(np)}})
		for _, p := range res.NewNodeClaims {
			families := map[string]bool{}
			for _, it := range p.InstanceTypes {
				families[it.Labels[catalog.LabelInstanceFamily]] = true
			}
			if len(families) < 40 {
				t.Errorf("plan keeps %d families, minValues is 40", len(families))
			}
			var mv *int
			for _, r := range p.Requirements {
				if r.Key == catalog.LabelInstanceFamily {
					mv = r.MinValues
				}
			}
			if mv == nil || *mv != 40 {
				t.Errorf("family requirement minValues %v, want 40", mv)
			}
		}
	})
	t.Run("pod narrows below minValues", func(t *testing.T) {
		np := withMin(catalog.LabelInstanceCategory, 3, "c", "m", "r")
		in := scheduling.Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi", nodeSelector(catalog.LabelInstanceCategory, "c"))}, NodePools: []scheduling.NodePoolInput{pool(np)}}
		err := solve(t, in).Unschedulable[in.Pods[0].UID]
		if err == nil || !strings.Contains(err.Error(), `NodePool "general-purpose" requires minValues 3 for karpenter.k8s.aws/instance-category but only 1 value(s) fit`) {
			t.Errorf("reason %v, want a minValues explanation", err)
		}
	})
	t.Run("BestEffort relaxes minValues only when the pod fits nowhere else", func(t *testing.T) {
		np := withMin(catalog.LabelInstanceCategory, 3, "c", "m", "r")
		for _, tt := range []struct {
			name    string
			pods    []*corev1.Pod
			relaxed bool
		}{
			{name: "pods fit with minValues kept: not relaxed", pods: pods(3, "any", "1", "1Gi")},
			{name: "a pod needing category c joins the open plan, relaxed to 1 value", pods: []*corev1.Pod{
				pod("only-c", "1", "1Gi", nodeSelector(catalog.LabelInstanceCategory, "c")), pod("any", "8", "16Gi"),
			}, relaxed: true},
		} {
			t.Run(tt.name, func(t *testing.T) {
				in := scheduling.Input{Pods: tt.pods, NodePools: []scheduling.NodePoolInput{pool(np)}, MinValuesPolicy: scheduling.MinValuesPolicyBestEffort}
				res := solve(t, in)
				if len(res.Unschedulable) != 0 || len(res.NewNodeClaims) != 1 {
					t.Fatalf("%d NodeClaims, unschedulable %v; want 1 NodeClaim", len(res.NewNodeClaims), res.Unschedulable)
				}
				p := res.NewNodeClaims[0]
				var mv *int
				for _, r := range p.Requirements {
					if r.Key == catalog.LabelInstanceCategory {
						mv = r.MinValues
					}
				}
				want := 3
				if tt.relaxed {
					want = 1
				}
				if p.MinValuesRelaxed != tt.relaxed || mv == nil || *mv != want {
					t.Errorf("MinValuesRelaxed %t, category minValues %v; want %t and %d", p.MinValuesRelaxed, mv, tt.relaxed, want)
				}
				if got := p.NodeClaim().Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey]; (got == "true") != tt.relaxed {
					t.Errorf("min-values-relaxed annotation %q, want it iff relaxed", got)
				}
			})
		}
	})
	t.Run("plan closes before breaking minValues", func(t *testing.T) {
		// Big pods: the more a plan holds, the fewer families fit.
		np := withMin(catalog.LabelInstanceFamily, 20)
		res := solve(t, scheduling.Input{Pods: pods(12, "p", "15", "30Gi"), NodePools: []scheduling.NodePoolInput{pool(np)}})
		if len(res.Unschedulable) != 0 {
			t.Fatalf("unschedulable: %v", res.Unschedulable)
		}
		for _, p := range res.NewNodeClaims {
			families := map[string]bool{}
			for _, it := range p.InstanceTypes {
				families[it.Labels[catalog.LabelInstanceFamily]] = true
			}
			if len(families) < 20 {
				t.Errorf("plan with %d pods keeps %d families, minValues is 20", len(p.Pods), len(families))
			}
		}
	})
}

func TestDaemonSetOverhead(t *testing.T) {
	np := generalPurpose()
	np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}
	tolerate := toleration("dedicated", "web", corev1.TaintEffectNoSchedule)
	ds := []*corev1.Pod{
		pod("ds-counted", "1", "1Gi", tolerate),
		pod("ds-untolerated", "2", "2Gi"),
		pod("ds-arm-only", "4", "4Gi", tolerate, nodeSelector(corev1.LabelArchStable, "arm64")),
	}
	res := solve(t, scheduling.Input{Pods: pods(2, "p", "1", "1Gi", tolerate), DaemonSetPods: ds, NodePools: []scheduling.NodePoolInput{pool(np)}})
	got := res.NewNodeClaims[0].Requests
	want := resources("cpu", "3", "memory", "3Gi", "pods", "3")
	for name, q := range want {
		if g := got[name]; g.Cmp(q) != 0 {
			t.Errorf("requests %s=%s, want %s (pods plus the one tolerated amd64 DaemonSet)", name, g.String(), q.String())
		}
	}
}

func TestPacking(t *testing.T) {
	t.Run("first-fit decreasing fills plans", func(t *testing.T) {
		// One 48-vCPU pod and small ones: the small pods join its plan.
		in := scheduling.Input{Pods: append(pods(10, "small", "500m", "512Mi"), pod("big", "40", "64Gi")), NodePools: []scheduling.NodePoolInput{pool(generalPurpose())}}
		res := solve(t, in)
		if len(res.NewNodeClaims) != 1 || res.NewNodeClaims[0].Pods[0].Name != "big" {
			t.Fatalf("want one plan led by the big pod, got %d plans", len(res.NewNodeClaims))
		}
	})
	t.Run("incompatible pods get separate plans", func(t *testing.T) {
		in := scheduling.Input{Pods: append(pods(3, "a", "1", "1Gi", nodeSelector(corev1.LabelTopologyZone, "us-east-1a")),
			pods(3, "b", "1", "1Gi", nodeSelector(corev1.LabelTopologyZone, "us-east-1b"))...), NodePools: []scheduling.NodePoolInput{pool(generalPurpose())}}
		res := solve(t, in)
		if len(res.NewNodeClaims) != 2 {
			t.Fatalf("%d plans, want one per zone", len(res.NewNodeClaims))
		}
		for _, p := range res.NewNodeClaims {
			if z := valuesOf(p, corev1.LabelTopologyZone); len(z) != 1 || len(p.Pods) != 3 {
				t.Errorf("plan with %d pods has zones %v, want 3 pods in one zone", len(p.Pods), z)
			}
		}
	})
	t.Run("many pods split across nodes", func(t *testing.T) {
		in := scheduling.Input{Pods: pods(400, "p", "1", "2Gi"), NodePools: []scheduling.NodePoolInput{pool(generalPurpose())}}
		res := solve(t, in)
		if len(res.NewNodeClaims) < 2 || placedPods(res) != 400 {
			t.Errorf("%d plans for %d placed pods; 400 vCPU needs several nodes", len(res.NewNodeClaims), placedPods(res))
		}
	})
}

func TestDeterminism(t *testing.T) {
	var all []*corev1.Pod
	for i := 0; i < 120; i++ {
		cpu := []string{"250m", "500m", "1", "2"}[i%4]
		var opts []podOption
		if i%7 == 0 {
			opts = append(opts, nodeSelector(corev1.LabelTopologyZone, zones[i%3]))
		}
		all = append(all, pod(fmt.Sprintf("p-%03d", i), cpu, "1Gi", opts...))
	}
	all = append(all, pod("bad", "1", "1Gi", nodeSelector(corev1.LabelArchStable, "s390x")))
	second := generalPurpose()
	second.Name = "second"
	summary := func(res scheduling.Result) string {
		var b strings.Builder
		for _, p := range res.NewNodeClaims {
			fmt.Fprintf(&b, "%s %.4f %v:", p.NodePool.Name, p.PriceUSDPerHour, p.Requirements)
			for _, pod := range p.Pods {
				b.WriteString(" " + pod.Name)
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%v", res.Unschedulable)
		return b.String()
	}
	var want string
	rng := rand.New(rand.NewSource(1))
	for run := 0; run < 5; run++ {
		ps := append([]*corev1.Pod(nil), all...)
		rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		types := allTypes()
		rng.Shuffle(len(types), func(i, j int) { types[i], types[j] = types[j], types[i] })
		nps := []scheduling.NodePoolInput{{NodePool: generalPurpose(), InstanceTypes: types}, pool(second)}
		rng.Shuffle(len(nps), func(i, j int) { nps[i], nps[j] = nps[j], nps[i] })
		got := summary(solve(t, scheduling.Input{Pods: ps, NodePools: nps}))
		if run == 0 {
			want = got
		} else if got != want {
			t.Fatalf("run %d differs from run 0:\n%s\nvs\n%s", run, got, want)
		}
	}
}

func TestNodeClaim(t *testing.T) {
	np := generalPurpose()
	np.Spec.Template.Labels = map[string]string{"team": "ml"}
	np.Spec.Template.Annotations = map[string]string{"example.com/owner": "ml"}
	np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req("tier", corev1.NodeSelectorOpIn, "gold", "silver"))
	np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "startup", Effect: corev1.TaintEffectNoSchedule}}
	np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("720h")
	res := solve(t, scheduling.Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi", nodeSelector("tier", "silver"))}, NodePools: []scheduling.NodePoolInput{pool(np)}})
	plan := res.NewNodeClaims[0]
	nc := plan.NodeClaim()
	checks := map[string][2]any{
		"generateName":        {nc.GenerateName, "general-purpose-"},
		"nodepool label":      {nc.Labels[karpv1.NodePoolLabelKey], "general-purpose"},
		"template label":      {nc.Labels["team"], "ml"},
		"resolved label":      {nc.Labels["tier"], "silver"},
		"node class label":    {nc.Labels["karpenter.k8s.aws/ec2nodeclass"], "default"},
		"annotation":          {nc.Annotations["example.com/owner"], "ml"},
		"hash annotation":     {nc.Annotations[karpv1.NodePoolHashAnnotationKey], np.Hash()},
		"owner":               {nc.OwnerReferences[0].Name, "general-purpose"},
		"node class":          {nc.Spec.NodeClassRef.Name, "default"},
		"expireAfter":         {nc.Spec.ExpireAfter.String(), "720h0m0s"},
		"startup taints":      {len(nc.Spec.StartupTaints), 1},
		"requirements copied": {reflect.DeepEqual(nc.Spec.Requirements, plan.Requirements), true},
		"requests copied":     {reflect.DeepEqual(nc.Spec.Resources.Requests, plan.Requests), true},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %v, want %v", name, c[0], c[1])
		}
	}
	if _, ok := nc.Labels[catalog.LabelInstanceCategory]; ok {
		t.Errorf("instance-dependent label %s set on the NodeClaim", catalog.LabelInstanceCategory)
	}
	nc.Spec.Requirements[0].Values[0] = "mutated"
	if plan.Requirements[0].Values[0] == "mutated" {
		t.Error("NodeClaim shares requirement values with the plan")
	}
}

func TestCustomLabels(t *testing.T) {
	np := generalPurpose()
	np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req("tier", corev1.NodeSelectorOpIn, "gold", "silver"))
	t.Run("pods selecting different values get different nodes", func(t *testing.T) {
		in := scheduling.Input{Pods: []*corev1.Pod{
			pod("gold", "1", "1Gi", nodeSelector("tier", "gold")),
			pod("silver", "1", "1Gi", nodeSelector("tier", "silver")),
			pod("any", "1", "1Gi"),
		}, NodePools: []scheduling.NodePoolInput{pool(np)}}
		res := solve(t, in)
		if len(res.NewNodeClaims) != 2 {
			t.Fatalf("%d plans, want 2 (one per tier)", len(res.NewNodeClaims))
		}
		for _, p := range res.NewNodeClaims {
			tier := p.NodeClaim().Labels["tier"]
			for _, pod := range p.Pods {
				if want := pod.Spec.NodeSelector["tier"]; want != "" && want != tier {
					t.Errorf("pod %s selects tier=%s, lands on a tier=%s NodeClaim", pod.Name, want, tier)
				}
			}
		}
	})
	t.Run("value outside the NodePool", func(t *testing.T) {
		in := scheduling.Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi", nodeSelector("tier", "bronze"))}, NodePools: []scheduling.NodePoolInput{pool(np)}}
		err := solve(t, in).Unschedulable[in.Pods[0].UID]
		if err == nil || !strings.Contains(err.Error(), "nodeSelector tier=bronze conflicts with NodePool requirement tier In [gold,silver]") {
			t.Errorf("reason %v", err)
		}
	})
	t.Run("pod contradicts itself", func(t *testing.T) {
		in := scheduling.Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi", nodeSelector("tier", "gold"),
			affinity([]corev1.NodeSelectorRequirement{expr("tier", corev1.NodeSelectorOpIn, "silver")}))}, NodePools: []scheduling.NodePoolInput{pool(np)}}
		err := solve(t, in).Unschedulable[in.Pods[0].UID]
		if err == nil || !strings.Contains(err.Error(), "contradict each other") {
			t.Errorf("reason %v", err)
		}
	})
}

func TestNodePoolProblems(t *testing.T) {
	badGt := nodePool("bad", req(catalog.LabelInstanceCPU, corev1.NodeSelectorOpGt, "many"))
	static := generalPurpose()
	static.Spec.Replicas = new(int64)
	conflicting := generalPurpose()
	conflicting.Spec.Template.Labels = map[string]string{"tier": "gold"}
	conflicting.Spec.Template.Spec.Requirements = append(conflicting.Spec.Template.Spec.Requirements, req("tier", corev1.NodeSelectorOpIn, "silver"))
	noneMatch := generalPurpose()
	noneMatch.Spec.Template.Spec.Requirements = append(noneMatch.Spec.Template.Spec.Requirements, req(catalog.LabelInstanceFamily, corev1.NodeSelectorOpIn, "z9"))
	tests := []struct {
		name  string
		input scheduling.NodePoolInput
		want  string
	}{
		{"invalid Gt", pool(badGt), `NodePool "bad" has an invalid requirement: NodePool requirement karpenter.k8s.aws/instance-cpu Gt many: operator Gt needs an integer value`},
		{"static", pool(static), `NodePool "general-purpose" is static (spec.replicas: 0)`},
		{"label vs requirement", pool(conflicting), `NodePool "general-purpose" can launch no node: NodePool requirement tier In [silver] and NodePool label tier=gold contradict each other`},
		{"no type matches", pool(noneMatch), `no instance type satisfies its NodePool requirement karpenter.k8s.aws/instance-family In [z9]`},
		{"no instance types", scheduling.NodePoolInput{NodePool: generalPurpose()}, `NodePool "general-purpose" has no instance types`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := scheduling.Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi")}, NodePools: []scheduling.NodePoolInput{tt.input}}
			err := solve(t, in).Unschedulable[in.Pods[0].UID]
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("reason %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
