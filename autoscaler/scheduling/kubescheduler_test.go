package scheduling_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/scheduling"
)

// clusterNode is a node of the cluster a Result leads to: an existing node
// with its old and newly placed pods, or a planned node as launched with
// the cheapest type and offering of its plan.
type clusterNode struct {
	node    *corev1.Node
	taints  []corev1.Taint
	old     []*corev1.Pod
	placed  []*corev1.Pod
	planned bool
}

func (n *clusterNode) pods() []*corev1.Pod { return append(append([]*corev1.Pod(nil), n.old...), n.placed...) }

// clusterAfter builds the cluster res leads to.
func clusterAfter(in scheduling.Input, res scheduling.Result) []*clusterNode {
	var out []*clusterNode
	for _, e := range in.ExistingNodes {
		l := map[string]string{corev1.LabelHostname: e.Name}
		for k, v := range e.Labels {
			l[k] = v
		}
		out = append(out, &clusterNode{node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.Name, Labels: l}}, taints: e.Taints, old: e.Pods, placed: res.ExistingPlacements[e.Name]})
	}
	for i, p := range res.NewNodeClaims {
		node := nodeFor(p, p.InstanceTypes[0])
		node.Name = fmt.Sprintf("plan-%d", i)
		node.Labels[corev1.LabelHostname] = node.Name
		out = append(out, &clusterNode{node: node, taints: p.NodePool.Spec.Template.Spec.Taints, placed: p.Pods, planned: true})
	}
	return out
}

// checkKubeScheduler verifies that the kube-scheduler would accept every
// placed pod on its node in the cluster res leads to, using
// component-helpers' node affinity and taint matchers and the
// kube-scheduler's rules for host ports, required inter-pod affinity and
// anti-affinity (both directions) and DoNotSchedule topology spread on the
// keys Solve models.
func checkKubeScheduler(t *testing.T, in scheduling.Input, res scheduling.Result) {
	t.Helper()
	cluster := clusterAfter(in, res)
	domain := func(n *clusterNode, key string) (string, bool) {
		v, ok := n.node.Labels[key]
		return v, ok
	}
	matches := func(term corev1.PodAffinityTerm, owner, other *corev1.Pod) bool {
		ns := term.Namespaces
		if len(ns) == 0 && term.NamespaceSelector == nil {
			ns = []string{owner.Namespace}
		}
		if len(ns) > 0 && !contains(ns, other.Namespace) {
			return false
		}
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		return err == nil && sel.Matches(labels.Set(other.Labels))
	}
	for _, n := range cluster {
		ports := map[string]string{}
		for _, pod := range n.pods() {
			for _, c := range pod.Spec.Containers {
				for _, p := range c.Ports {
					if p.HostPort == 0 {
						continue
					}
					k := fmt.Sprintf("%s/%d", p.Protocol, p.HostPort)
					if other, dup := ports[k]; dup {
						t.Errorf("node %s: pods %s and %s both bind host port %s", n.node.Name, other, pod.Name, k)
					}
					ports[k] = pod.Name
				}
			}
		}
		for _, pod := range n.placed {
			if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(n.node); err != nil || !ok {
				t.Errorf("node %s: pod %s does not match its labels %v", n.node.Name, pod.Name, n.node.Labels)
			}
			if taint, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
				return t.Effect != corev1.TaintEffectPreferNoSchedule && t.Key != karpv1.UnregisteredTaintKey
			}, false); bad {
				t.Errorf("node %s: pod %s does not tolerate %v", n.node.Name, pod.Name, taint)
			}
			for _, r := range in.VolumeRequirements[pod.UID] {
				sel, _ := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{r}}}})
				if !sel.Match(n.node) {
					t.Errorf("node %s: pod %s's volume requires %v", n.node.Name, pod.Name, r)
				}
			}
			a := pod.Spec.Affinity
			if a != nil && a.PodAffinity != nil {
				for _, term := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					d, ok := domain(n, term.TopologyKey)
					found, any := false, false
					for _, m := range cluster {
						for _, other := range m.pods() {
							if other == pod || !matches(term, pod, other) {
								continue
							}
							any = true
							if md, mok := domain(m, term.TopologyKey); ok && mok && md == d {
								found = true
							}
						}
					}
					if !found && (any || !matches(term, pod, pod)) {
						t.Errorf("node %s: pod %s's pod affinity on %s is not satisfied", n.node.Name, pod.Name, term.TopologyKey)
					}
				}
			}
			for _, c := range pod.Spec.TopologySpreadConstraints {
				if c.WhenUnsatisfiable != corev1.DoNotSchedule {
					continue
				}
				sel, _ := metav1.LabelSelectorAsSelector(c.LabelSelector)
				counts := map[string]int{}
				req := nodeaffinity.GetRequiredNodeAffinity(pod)
				for _, m := range cluster {
					md, ok := domain(m, c.TopologyKey)
					if !ok {
						continue
					}
					if match, _ := req.Match(m.node); !match {
						continue
					}
					counts[md] += 0
					for _, other := range m.pods() {
						if other.Namespace == pod.Namespace && sel.Matches(labels.Set(other.Labels)) {
							counts[md]++
						}
					}
				}
				minCount := -1
				for _, v := range counts {
					if minCount < 0 || v < minCount {
						minCount = v
					}
				}
				if c.MinDomains != nil && int(*c.MinDomains) > len(counts) {
					minCount = 0
				}
				d, _ := domain(n, c.TopologyKey)
				if counts[d]-minCount > int(c.MaxSkew) {
					t.Errorf("node %s: pod %s's spread on %s has skew %d > %d (counts %v)", n.node.Name, pod.Name, c.TopologyKey, counts[d]-minCount, c.MaxSkew, counts)
				}
			}
		}
		// Anti-affinity both ways: no pod shares a domain with a pod
		// another's required anti-affinity term selects.
		for _, owner := range n.pods() {
			a := owner.Spec.Affinity
			if a == nil || a.PodAntiAffinity == nil {
				continue
			}
			for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				d, ok := domain(n, term.TopologyKey)
				if !ok {
					continue
				}
				for _, m := range cluster {
					if md, mok := domain(m, term.TopologyKey); !mok || md != d {
						continue
					}
					for _, other := range m.pods() {
						if other != owner && matches(term, owner, other) && (isPlaced(res, owner) || isPlaced(res, other)) {
							t.Errorf("pods %s (node %s) and %s (node %s) share %s=%s against %s's anti-affinity", owner.Name, n.node.Name, other.Name, m.node.Name, term.TopologyKey, d, owner.Name)
						}
					}
				}
			}
		}
	}
}

// isPlaced reports whether pod was placed by res (rather than already
// running).
func isPlaced(res scheduling.Result, pod *corev1.Pod) bool {
	for _, p := range res.NewNodeClaims {
		for _, q := range p.Pods {
			if q == pod {
				return true
			}
		}
	}
	for _, ps := range res.ExistingPlacements {
		for _, q := range ps {
			if q == pod {
				return true
			}
		}
	}
	return false
}
