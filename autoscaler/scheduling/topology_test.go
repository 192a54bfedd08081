package scheduling_test

import (
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/scheduling"
)

func withLabels(kv ...string) podOption {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func spread(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, s *metav1.LabelSelector, tweak ...func(*corev1.TopologySpreadConstraint)) podOption {
	return func(p *corev1.Pod) {
		c := corev1.TopologySpreadConstraint{MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when, LabelSelector: s}
		for _, f := range tweak {
			f(&c)
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
	}
}

func ensureAffinity(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

func podAffinity(key string, s *metav1.LabelSelector) podOption {
	return func(p *corev1.Pod) {
		a := ensureAffinity(p)
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: s})
	}
}

func podAntiAffinity(key string, s *metav1.LabelSelector) podOption {
	return func(p *corev1.Pod) {
		a := ensureAffinity(p)
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: s})
	}
}

func preferredAntiAffinity(weight int32, key string, s *metav1.LabelSelector) podOption {
	return func(p *corev1.Pod) {
		a := ensureAffinity(p)
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: s}})
	}
}

func preferredNode(weight int32, exprs ...corev1.NodeSelectorRequirement) podOption {
	return func(p *corev1.Pod) {
		a := ensureAffinity(p)
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: exprs}})
	}
}

func hostPort(port int32) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port, Protocol: corev1.ProtocolTCP})
	}
}

// existingNode is a node in zone with room for 8 cpu / 32Gi / 50 pods,
// running pods.
func existingNode(name, zone string, running ...*corev1.Pod) scheduling.ExistingNode {
	return scheduling.ExistingNode{
		Name: name,
		Labels: map[string]string{corev1.LabelTopologyZone: zone, corev1.LabelHostname: name, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux",
			karpv1.CapacityTypeLabelKey: "on-demand", corev1.LabelInstanceTypeStable: "m5.2xlarge"},
		Available: resources("cpu", "8", "memory", "32Gi", "pods", "50"),
		Pods:      running,
	}
}

// zonesOfPods returns, per zone, how many of the placed pods (new plans
// and existing placements) land there.
func zonesOfPods(in scheduling.Input, res scheduling.Result) map[string]int {
	out := map[string]int{}
	for _, p := range res.NewNodeClaims {
		z := valuesOf(p, corev1.LabelTopologyZone)
		if len(z) != 1 {
			out["unpinned"] += len(p.Pods)
			continue
		}
		out[z[0]] += len(p.Pods)
	}
	for _, n := range in.ExistingNodes {
		out[n.Labels[corev1.LabelTopologyZone]] += len(res.ExistingPlacements[n.Name])
	}
	return out
}

func TestTopology(t *testing.T) {
	zoneA, zoneB, zoneC := zones[0], zones[1], zones[2]
	web := withLabels("app", "web")
	tests := []struct {
		name     string
		pods     []*corev1.Pod
		existing []scheduling.ExistingNode
		volumes  map[types.UID][]corev1.NodeSelectorRequirement
		// nodePool defaults to generalPurpose (on-demand only).
		nodePool *karpv1.NodePool
		// want: placed pods per zone; plans: NodeClaims; unschedulable:
		// how many pods, and a substring of one reason.
		want          map[string]int
		plans         int
		unschedulable int
		reason        string
	}{
		{
			name:  "zone spread maxSkew 1 puts 2 pods in each of 3 zones",
			pods:  pods(6, "web", "500m", "512Mi", web, spread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, sel("app", "web"))),
			want:  map[string]int{zoneA: 2, zoneB: 2, zoneC: 2},
			plans: 3,
		},
		{
			name:  "hostname spread maxSkew 2 puts at most 2 pods per node",
			pods:  pods(5, "web", "500m", "512Mi", web, spread(corev1.LabelHostname, 2, corev1.DoNotSchedule, sel("app", "web"))),
			plans: 3,
		},
		{
			name:     "zone spread counts pods already running: zone a has 2, so new pods go to b and c first",
			pods:     pods(4, "web", "500m", "512Mi", web, spread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, sel("app", "web"))),
			existing: []scheduling.ExistingNode{existingNode("node-a", zoneA, pod("old-1", "100m", "1Mi", web), pod("old-2", "100m", "1Mi", web))},
			want:     map[string]int{zoneB: 2, zoneC: 2},
			plans:    2,
		},
		{
			name: "minDomains above the zone count makes the minimum 0: one pod per zone, the 4th unschedulable",
			pods: pods(4, "web", "500m", "512Mi", web, spread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, sel("app", "web"), func(c *corev1.TopologySpreadConstraint) {
				c.MinDomains = ptr.To[int32](5)
			})),
			want: map[string]int{zoneA: 1, zoneB: 1, zoneC: 1}, plans: 3, unschedulable: 1, reason: "topology spread on topology.kubernetes.io/zone",
		},
		{
			name: "nodeAffinityPolicy Honor (default): a pod pinned to zone a spreads only over zone a",
			pods: pods(3, "web", "500m", "512Mi", web, nodeSelector(corev1.LabelTopologyZone, zoneA), spread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, sel("app", "web"))),
			want: map[string]int{zoneA: 3}, plans: 1,
		},
		{
			name: "nodeAffinityPolicy Ignore: other zones count with 0, so zone a takes only 1",
			pods: pods(3, "web", "500m", "512Mi", web, nodeSelector(corev1.LabelTopologyZone, zoneA), spread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, sel("app", "web"), func(c *corev1.TopologySpreadConstraint) {
				c.NodeAffinityPolicy = ptr.To(corev1.NodeInclusionPolicyIgnore)
			})),
			want: map[string]int{zoneA: 1}, plans: 1, unschedulable: 2, reason: "topology spread",
		},
		{
			name: "matchLabelKeys: two revisions spread independently",
			pods: append(
				pods(3, "rev1", "500m", "512Mi", withLabels("app", "web", "pod-template-hash", "1"), spread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, sel("app", "web"), func(c *corev1.TopologySpreadConstraint) {
					c.MatchLabelKeys = []string{"pod-template-hash"}
				})),
				pods(3, "rev2", "500m", "512Mi", withLabels("app", "web", "pod-template-hash", "2"), spread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, sel("app", "web"), func(c *corev1.TopologySpreadConstraint) {
					c.MatchLabelKeys = []string{"pod-template-hash"}
				}))...),
			want: map[string]int{zoneA: 2, zoneB: 2, zoneC: 2},
		},
		{
			name:     "capacity-type spread: one spot, one on-demand",
			pods:     pods(2, "web", "500m", "512Mi", web, spread(karpv1.CapacityTypeLabelKey, 1, corev1.DoNotSchedule, sel("app", "web"))),
			nodePool: nodePool("any"),
			plans:    2,
		},
		{
			name:  "capacity-type spread on an on-demand-only NodePool: both on-demand (control)",
			pods:  pods(2, "web", "500m", "512Mi", web, spread(karpv1.CapacityTypeLabelKey, 1, corev1.DoNotSchedule, sel("app", "web"))),
			plans: 1,
		},
		{
			name:  "hostname anti-affinity: one pod per node",
			pods:  pods(4, "web", "500m", "512Mi", web, podAntiAffinity(corev1.LabelHostname, sel("app", "web"))),
			plans: 4,
		},
		{
			name:     "hostname anti-affinity against a running pod keeps the pod off that node",
			pods:     []*corev1.Pod{pod("web", "500m", "512Mi", web, podAntiAffinity(corev1.LabelHostname, sel("app", "web")))},
			existing: []scheduling.ExistingNode{existingNode("node-a", zoneA, pod("old", "100m", "1Mi", web))},
			plans:    1,
		},
		{
			name:     "a running pod's anti-affinity keeps matching pods off its node (inverse)",
			pods:     []*corev1.Pod{pod("web", "500m", "512Mi", web)},
			existing: []scheduling.ExistingNode{existingNode("node-a", zoneA, pod("db", "100m", "1Mi", withLabels("app", "db"), podAntiAffinity(corev1.LabelHostname, sel("app", "web"))))},
			plans:    1,
		},
		{
			name:     "without anti-affinity the running node takes the pod (control)",
			pods:     []*corev1.Pod{pod("web", "500m", "512Mi", web)},
			existing: []scheduling.ExistingNode{existingNode("node-a", zoneA, pod("db", "100m", "1Mi", withLabels("app", "db")))},
			want:     map[string]int{zoneA: 1},
		},
		{
			name: "zone anti-affinity: 3 zones hold 3 pods, the 4th is unschedulable",
			pods: pods(4, "web", "500m", "512Mi", web, podAntiAffinity(corev1.LabelTopologyZone, sel("app", "web"))),
			want: map[string]int{zoneA: 1, zoneB: 1, zoneC: 1}, plans: 3, unschedulable: 1, reason: "pod anti-affinity on topology.kubernetes.io/zone",
		},
		{
			name:     "zone affinity to a running pod in zone b pins the new node to zone b",
			pods:     pods(2, "web", "8", "16Gi", podAffinity(corev1.LabelTopologyZone, sel("app", "cache"))),
			existing: []scheduling.ExistingNode{existingNode("node-b", zoneB, pod("cache", "100m", "1Mi", withLabels("app", "cache")))},
			want:     map[string]int{zoneB: 2},
		},
		{
			name: "self zone affinity: the first pod picks a zone, the rest follow",
			pods: pods(20, "web", "4", "8Gi", web, podAffinity(corev1.LabelTopologyZone, sel("app", "web"))),
			want: map[string]int{zoneA: 20},
		},
		{
			name:          "hostname affinity to a running pod on a full node is unschedulable",
			pods:          []*corev1.Pod{pod("web", "16", "1Gi", podAffinity(corev1.LabelHostname, sel("app", "cache")))},
			existing:      []scheduling.ExistingNode{existingNode("node-b", zoneB, pod("cache", "100m", "1Mi", withLabels("app", "cache")))},
			unschedulable: 1, reason: "pod affinity on kubernetes.io/hostname",
		},
		{
			name:  "host ports: two pods binding 8080 need two nodes",
			pods:  pods(2, "web", "500m", "512Mi", hostPort(8080)),
			plans: 2,
		},
		{
			name:  "host ports: different ports share a node (control)",
			pods:  []*corev1.Pod{pod("a", "500m", "512Mi", hostPort(8080)), pod("b", "500m", "512Mi", hostPort(9090))},
			plans: 1,
		},
		{
			name:     "host ports: a running pod's port keeps the pod off its node",
			pods:     []*corev1.Pod{pod("web", "500m", "512Mi", hostPort(8080))},
			existing: []scheduling.ExistingNode{existingNode("node-a", zoneA, pod("old", "100m", "1Mi", hostPort(8080)))},
			plans:    1,
		},
		{
			name:     "volume topology: a pod whose volume is in zone c goes to zone c, not to the node in zone a",
			pods:     []*corev1.Pod{pod("db", "500m", "512Mi")},
			existing: []scheduling.ExistingNode{existingNode("node-a", zoneA)},
			volumes:  map[types.UID][]corev1.NodeSelectorRequirement{"uid-db": {expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zoneC)}},
			want:     map[string]int{zoneC: 1},
		},
		{
			name: "preferred node affinity is honoured when it can be",
			pods: []*corev1.Pod{pod("web", "500m", "512Mi", preferredNode(10, expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zoneC)))},
			want: map[string]int{"unpinned": 0, zoneC: 1},
		},
		{
			name:  "preferred node affinity no NodePool can satisfy is relaxed",
			pods:  []*corev1.Pod{pod("web", "500m", "512Mi", preferredNode(10, expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "mars-1a")))},
			plans: 1,
		},
		{
			name: "preferred zone anti-affinity: 3 zones first, then relaxed for the 4th",
			pods: pods(4, "web", "500m", "512Mi", web, preferredAntiAffinity(10, corev1.LabelTopologyZone, sel("app", "web"))),
			want: map[string]int{zoneA: 2, zoneB: 1, zoneC: 1},
		},
		{
			name: "ScheduleAnyway spread is tried as DoNotSchedule first",
			pods: pods(3, "web", "500m", "512Mi", web, spread(corev1.LabelTopologyZone, 1, corev1.ScheduleAnyway, sel("app", "web"))),
			want: map[string]int{zoneA: 1, zoneB: 1, zoneC: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := tt.nodePool
			if np == nil {
				np = generalPurpose()
			}
			in := scheduling.Input{Pods: tt.pods, ExistingNodes: tt.existing, VolumeRequirements: tt.volumes, NodePools: []scheduling.NodePoolInput{pool(np)}}
			res := solve(t, in)
			if len(res.Unschedulable) != tt.unschedulable {
				t.Fatalf("%d unschedulable (%v), want %d", len(res.Unschedulable), res.Unschedulable, tt.unschedulable)
			}
			if tt.reason != "" {
				found := false
				for _, err := range res.Unschedulable {
					found = found || strings.Contains(err.Error(), tt.reason)
				}
				if !found {
					t.Errorf("no reason mentions %q: %v", tt.reason, res.Unschedulable)
				}
			}
			if tt.plans != 0 && len(res.NewNodeClaims) != tt.plans {
				t.Errorf("%d NodeClaims, want %d", len(res.NewNodeClaims), tt.plans)
			}
			if tt.want != nil {
				got := zonesOfPods(in, res)
				for z, n := range tt.want {
					if got[z] != n {
						t.Errorf("zone %s has %d pods, want %d (all: %v)", z, got[z], n, got)
					}
				}
				if tt.name == "zone anti-affinity: 3 zones hold 3 pods, the 4th is unschedulable" || strings.HasPrefix(tt.name, "zone spread") {
					if got["unpinned"] != 0 {
						t.Errorf("%d pods on NodeClaims whose zone is not pinned", got["unpinned"])
					}
				}
			}
		})
	}
}

// TestPreferredHostnameAntiAffinity: like Karpenter, preferred hostname
// anti-affinity is honoured while it can be, giving each pod its own node.
func TestPreferredHostnameAntiAffinity(t *testing.T) {
	in := scheduling.Input{
		Pods:      pods(3, "web", "500m", "512Mi", withLabels("app", "web"), preferredAntiAffinity(1, corev1.LabelHostname, sel("app", "web"))),
		NodePools: []scheduling.NodePoolInput{pool(generalPurpose())},
	}
	if res := solve(t, in); len(res.NewNodeClaims) != 3 {
		t.Errorf("%d NodeClaims, want 3", len(res.NewNodeClaims))
	}
}

// TestZoneSpreadPlansArePinned: every plan holding a pod counted by a
// zone spread has exactly one zone in its requirements, so EC2 cannot put
// it in a zone that breaks the skew.
func TestZoneSpreadPlansArePinned(t *testing.T) {
	in := scheduling.Input{
		Pods: append(pods(9, "web", "2", "4Gi", withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, sel("app", "web"))),
			pods(5, "other", "1", "1Gi", withLabels("app", "web"))...),
		NodePools: []scheduling.NodePoolInput{pool(generalPurpose())},
	}
	res := solve(t, in)
	for i, p := range res.NewNodeClaims {
		if z := valuesOf(p, corev1.LabelTopologyZone); len(z) != 1 {
			t.Errorf("plan %d has zones %v, want exactly one", i, z)
		}
	}
	got := zonesOfPods(in, res)
	counts := []int{got[zones[0]], got[zones[1]], got[zones[2]]}
	sort.Ints(counts)
	if counts[2]-counts[0] > 1 {
		t.Errorf("app=web pods per zone %v: skew above 1", got)
	}
}
