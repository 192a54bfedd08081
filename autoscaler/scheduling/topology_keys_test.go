package scheduling_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/scheduling"
)

const (
	keyFamily = "karpenter.k8s.aws/instance-family"
	keyRack   = "example.com/rack"
)

// familyPool allows three instance families (several sizes each).
func familyPool() *karpv1.NodePool {
	return nodePool("families", req(keyFamily, corev1.NodeSelectorOpIn, "c5", "m5", "r5"))
}

// rackPool allows three values of a custom label key.
func rackPool() *karpv1.NodePool {
	return nodePool("racks", req(keyRack, corev1.NodeSelectorOpIn, "r1", "r2", "r3"))
}

// planDomains returns, per plan, the value of key its nodes get: the
// NodeClaim label (custom keys) or the label every instance type of the
// plan shares (instance type keys; "" when they differ).
func planDomains(res scheduling.Result, key string) []string {
	var out []string
	for _, p := range res.NewNodeClaims {
		if v, ok := p.NodeClaim().Labels[key]; ok {
			out = append(out, v)
			continue
		}
		v := p.InstanceTypes[0].Labels[key]
		for _, it := range p.InstanceTypes {
			if it.Labels[key] != v {
				v = ""
			}
		}
		out = append(out, v)
	}
	return out
}

// podsPerDomain counts the placed pods (plans and existing nodes) per
// domain of key.
func podsPerDomain(in scheduling.Input, res scheduling.Result, key string) map[string]int {
	out := map[string]int{}
	for i, d := range planDomains(res, key) {
		out[d] += len(res.NewNodeClaims[i].Pods)
	}
	for _, n := range in.ExistingNodes {
		if ps := res.ExistingPlacements[n.Name]; len(ps) > 0 {
			out[n.Labels[key]] += len(ps)
		}
	}
	return out
}

func TestTopologyAnyKey(t *testing.T) {
	web := withLabels("app", "web")
	tests := []struct {
		name string
		in   scheduling.Input
		key  string
		// want is the number of pods per domain of key; unschedulable the
		// number of pods left pending.
		want          map[string]int
		unschedulable int
	}{{
		name: "spread on instance-family over the NodePool's families",
		in: scheduling.Input{
			Pods:      pods(6, "web", "1", "1Gi", web, spread(keyFamily, 1, corev1.DoNotSchedule, sel("app", "web"))),
			NodePools: []scheduling.NodePoolInput{pool(familyPool())},
		},
		key:  keyFamily,
		want: map[string]int{"c5": 2, "m5": 2, "r5": 2},
	}, {
		name: "spread on a custom NodePool requirement key",
		in: scheduling.Input{
			Pods:      pods(7, "web", "1", "1Gi", web, spread(keyRack, 1, corev1.DoNotSchedule, sel("app", "web"))),
			NodePools: []scheduling.NodePoolInput{pool(rackPool())},
		},
		key:  keyRack,
		want: map[string]int{"r1": 3, "r2": 2, "r3": 2},
	}, {
		name: "spread on a template label across NodePools",
		in: scheduling.Input{
			Pods: pods(4, "web", "1", "1Gi", web, spread("example.com/team", 1, corev1.DoNotSchedule, sel("app", "web"))),
			NodePools: []scheduling.NodePoolInput{
				pool(withTemplateLabel(nodePool("blue"), "example.com/team", "blue")),
				pool(withTemplateLabel(nodePool("green"), "example.com/team", "green")),
			},
		},
		key:  "example.com/team",
		want: map[string]int{"blue": 2, "green": 2},
	}, {
		name: "existing nodes' domains count: new pods go to the emptier racks",
		in: scheduling.Input{
			Pods:      pods(4, "web", "1", "1Gi", web, spread(keyRack, 1, corev1.DoNotSchedule, sel("app", "web"))),
			NodePools: []scheduling.NodePoolInput{pool(rackPool())},
			ExistingNodes: []scheduling.ExistingNode{withNodeLabel(existingNode("full", zones[0],
				pod("old-1", "1", "1Gi", web), pod("old-2", "1", "1Gi", web)), keyRack, "r1")},
		},
		key:  keyRack,
		want: map[string]int{"r2": 2, "r3": 2},
	}, {
		name: "anti-affinity on instance-family: one pod per family, the fourth pending",
		in: scheduling.Input{
			Pods:      pods(4, "web", "1", "1Gi", web, podAntiAffinity(keyFamily, sel("app", "web"))),
			NodePools: []scheduling.NodePoolInput{pool(familyPool())},
		},
		key:           keyFamily,
		want:          map[string]int{"c5": 1, "m5": 1, "r5": 1},
		unschedulable: 1,
	}, {
		name: "affinity on a custom key follows the existing pod's rack",
		in: scheduling.Input{
			Pods:      pods(3, "api", "5", "2Gi", podAffinity(keyRack, sel("app", "db"))),
			NodePools: []scheduling.NodePoolInput{pool(rackPool())},
			ExistingNodes: []scheduling.ExistingNode{withNodeLabel(existingNode("db", zones[0],
				pod("db-0", "7", "31Gi", withLabels("app", "db"))), keyRack, "r2")},
		},
		key:  keyRack,
		want: map[string]int{"r2": 3},
	}, {
		name: "minDomains 4 over 3 racks: the global minimum is 0, so at most maxSkew per rack",
		in: scheduling.Input{
			Pods: pods(5, "web", "1", "1Gi", web, spread(keyRack, 1, corev1.DoNotSchedule, sel("app", "web"), func(c *corev1.TopologySpreadConstraint) {
				c.MinDomains = ptr.To[int32](4)
			})),
			NodePools: []scheduling.NodePoolInput{pool(rackPool())},
		},
		key:           keyRack,
		want:          map[string]int{"r1": 1, "r2": 1, "r3": 1},
		unschedulable: 2,
	}, {
		name: "nodeAffinityPolicy Honor: a pod limited to two families spreads over those two",
		in: scheduling.Input{
			Pods: pods(4, "web", "1", "1Gi", web, nodeSelector(keyFamily, "m5"), affinity([]corev1.NodeSelectorRequirement{expr(keyFamily, corev1.NodeSelectorOpIn, "c5", "m5")}),
				spread(keyFamily, 1, corev1.DoNotSchedule, sel("app", "web"))),
			NodePools: []scheduling.NodePoolInput{pool(familyPool())},
		},
		key:  keyFamily,
		want: map[string]int{"m5": 4},
	}, {
		name: "a key no NodePool or node carries leaves the pod pending",
		in: scheduling.Input{
			Pods:      pods(1, "web", "1", "1Gi", web, spread("example.com/nowhere", 1, corev1.DoNotSchedule, sel("app", "web"))),
			NodePools: []scheduling.NodePoolInput{pool(familyPool())},
		},
		key:           "example.com/nowhere",
		want:          map[string]int{},
		unschedulable: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := solve(t, tt.in)
			if len(res.Unschedulable) != tt.unschedulable {
				t.Fatalf("%d pods unschedulable, want %d: %v", len(res.Unschedulable), tt.unschedulable, res.Unschedulable)
			}
			got := podsPerDomain(tt.in, res, tt.key)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("pods per %s = %v, want %v", tt.key, got, tt.want)
			}
		})
	}
}

// TestTopologyAnyKeyErrors checks that a pod left pending for a key no
// NodePool produces is told which constraint and key.
func TestTopologyAnyKeyErrors(t *testing.T) {
	p := pod("web", "1", "1Gi", withLabels("app", "web"), spread("example.com/nowhere", 1, corev1.DoNotSchedule, sel("app", "web")))
	res := solve(t, scheduling.Input{Pods: []*corev1.Pod{p}, NodePools: []scheduling.NodePoolInput{pool(familyPool())}})
	err := res.Unschedulable[p.UID]
	if err == nil {
		t.Fatal("pod placed, want it pending")
	}
	want := `no example.com/nowhere value NodePool "families" can give the node satisfies the pod's topology spread on example.com/nowhere (maxSkew 1, selector app=web)`
	if err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

// TestNamespaceSelector places a pod whose hostname anti-affinity selects,
// by namespace label, the namespace of a pod on an existing node: it must
// not join that node. Control: with the namespace unlabelled the pod
// joins it.
func TestNamespaceSelector(t *testing.T) {
	running := pod("db-0", "1", "1Gi", withLabels("app", "db"))
	running.Namespace = "data"
	newPod := func() *corev1.Pod {
		return pod("api", "1", "1Gi", func(p *corev1.Pod) {
			podAntiAffinity(corev1.LabelHostname, sel("app", "db"))(p)
			p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].NamespaceSelector = sel("tier", "storage")
		})
	}
	for _, tt := range []struct {
		name       string
		nsLabels   map[string]map[string]string
		onExisting bool
	}{
		{name: "selected namespace blocks the node", nsLabels: map[string]map[string]string{"data": {"tier": "storage"}}},
		{name: "unselected namespace does not", nsLabels: map[string]map[string]string{"data": {"tier": "web"}}, onExisting: true},
		{name: "namespace without labels does not", onExisting: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := scheduling.Input{
				Pods:            []*corev1.Pod{newPod()},
				NodePools:       []scheduling.NodePoolInput{pool(generalPurpose())},
				ExistingNodes:   []scheduling.ExistingNode{existingNode("n1", zones[0], running)},
				NamespaceLabels: tt.nsLabels,
			}
			res := solve(t, in)
			if got := len(res.ExistingPlacements["n1"]) == 1; got != tt.onExisting {
				t.Errorf("placed on the existing node = %t, want %t (new plans %d, unschedulable %v)", got, tt.onExisting, len(res.NewNodeClaims), res.Unschedulable)
			}
		})
	}
}

// TestPropertyAnyKey solves random clusters whose constraints use an
// instance type key and a custom NodePool key as well as zone and
// hostname, some anti-affinity terms with a namespaceSelector, and checks every placement with the kube-scheduler's rules
// (checkInvariants).
func TestPropertyAnyKey(t *testing.T) {
	placed, total := 0, 0
	for seed := int64(1); seed <= 20; seed++ {
		in := randomInput(seed)
		swapKeys(in, seed)
		in.NodePools = []scheduling.NodePoolInput{pool(nodePool("any", req(keyRack, corev1.NodeSelectorOpIn, "r1", "r2", "r3", "r4")))}
		// Namespace default selected by label on odd seeds, not on even
		// ones: the terms swapKeys gives a namespaceSelector then count
		// every pod, or none.
		in.NamespaceLabels = map[string]map[string]string{"default": {"team": fmt.Sprint(seed % 2)}}
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			res := solve(t, in)
			total += len(in.Pods)
			placed += len(in.Pods) - len(res.Unschedulable)
		})
	}
	if placed < total*8/10 {
		t.Errorf("placed %d of %d pods, want at least 80%%", placed, total)
	}
}

// swapKeys rewrites some zone and capacity-type constraints of in's pods
// to instance-family and rack, and labels existing nodes with a rack.
// Spread constraints of pods pinned to a zone keep their key: Solve counts
// a spread's pods on every node of a domain, the kube-scheduler (with
// nodeAffinityPolicy Honor) only on the nodes the pod's node affinity
// matches, which differs when that affinity is on another key (doc.go).
func swapKeys(in scheduling.Input, seed int64) {
	swap := func(i int, key string) string {
		switch {
		case key == corev1.LabelTopologyZone && i%2 == 0:
			return keyFamily
		case key == karpv1.CapacityTypeLabelKey || (key == corev1.LabelTopologyZone && i%3 == 0):
			return keyRack
		}
		return key
	}
	for i, p := range in.Pods {
		for j := range p.Spec.TopologySpreadConstraints {
			if len(p.Spec.NodeSelector) > 0 || len(in.VolumeRequirements[p.UID]) > 0 {
				break
			}
			c := &p.Spec.TopologySpreadConstraints[j]
			c.TopologyKey = swap(i+int(seed), c.TopologyKey)
		}
		if a := p.Spec.Affinity; a != nil {
			if a.PodAffinity != nil {
				for j := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					term := &a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[j]
					term.TopologyKey = swap(i+j, term.TopologyKey)
				}
			}
			if a.PodAntiAffinity != nil {
				for j := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					term := &a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[j]
					term.TopologyKey = swap(i+j, term.TopologyKey)
					if (i+j)%3 == 0 {
						term.NamespaceSelector = sel("team", "1")
					}
				}
			}
		}
	}
	for i := range in.ExistingNodes {
		in.ExistingNodes[i].Labels[keyRack] = fmt.Sprintf("r%d", 1+i%4)
		in.ExistingNodes[i].Labels[keyFamily] = "m5"
	}
}

func withTemplateLabel(np *karpv1.NodePool, k, v string) *karpv1.NodePool {
	if np.Spec.Template.Labels == nil {
		np.Spec.Template.Labels = map[string]string{}
	}
	np.Spec.Template.Labels[k] = v
	return np
}

func withNodeLabel(n scheduling.ExistingNode, k, v string) scheduling.ExistingNode {
	n.Labels[k] = v
	return n
}
