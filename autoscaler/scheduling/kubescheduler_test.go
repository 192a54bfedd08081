package scheduling_test

import (
	"fmt"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourcehelper "k8s.io/component-helpers/resource"
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
// placed pod on its node, binding them in the order Solve placed them
// (largest cpu, then memory, first) onto the cluster res leads to: node
// affinity and taints with component-helpers' matchers, and the
// kube-scheduler's rules for host ports, required inter-pod affinity and
// anti-affinity (both directions) and DoNotSchedule topology spread, each
// judged against the pods bound so far.
func checkKubeScheduler(t *testing.T, in scheduling.Input, res scheduling.Result) {
	t.Helper()
	cluster := clusterAfter(in, res)
	bound := map[*clusterNode][]*corev1.Pod{}
	type binding struct {
		pod  *corev1.Pod
		node *clusterNode
	}
	var order []binding
	for _, n := range cluster {
		bound[n] = append(bound[n], n.old...)
		for _, pod := range n.placed {
			order = append(order, binding{pod, n})
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := requestsOf(order[i].pod), requestsOf(order[j].pod)
		if c := a.Cpu().Cmp(*b.Cpu()); c != 0 {
			return c > 0
		}
		if c := a.Memory().Cmp(*b.Memory()); c != 0 {
			return c > 0
		}
		return order[i].pod.Name < order[j].pod.Name
	})
	for _, b := range order {
		if why := kubeSchedulerRejects(in, cluster, bound, b.pod, b.node); why != "" {
			t.Errorf("node %s: the kube-scheduler would reject pod %s: %s", b.node.node.Name, b.pod.Name, why)
		}
		bound[b.node] = append(bound[b.node], b.pod)
	}
}

func requestsOf(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// kubeSchedulerRejects returns why the kube-scheduler would not bind pod
// to n given the pods bound so far, or "".
func kubeSchedulerRejects(in scheduling.Input, cluster []*clusterNode, bound map[*clusterNode][]*corev1.Pod, pod *corev1.Pod, n *clusterNode) string {
	domain := func(m *clusterNode, key string) (string, bool) {
		v, ok := m.node.Labels[key]
		return v, ok
	}
	// matches is the InterPodAffinity plugin's namespace and label test:
	// the term's namespaces plus those its namespaceSelector selects by
	// the Namespace's labels (an empty selector: every namespace), the
	// owner's namespace when neither is set.
	matches := func(term corev1.PodAffinityTerm, owner, other *corev1.Pod) bool {
		ns := term.Namespaces
		if len(ns) == 0 && term.NamespaceSelector == nil {
			ns = []string{owner.Namespace}
		}
		inNS := contains(ns, other.Namespace)
		if term.NamespaceSelector != nil && !inNS {
			nsSel, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector)
			inNS = err == nil && nsSel.Matches(labels.Set(in.NamespaceLabels[other.Namespace]))
		}
		if !inNS {
			return false
		}
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		return err == nil && sel.Matches(labels.Set(other.Labels))
	}
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(n.node); err != nil || !ok {
		return fmt.Sprintf("node affinity does not match labels %v", n.node.Labels)
	}
	if taint, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect != corev1.TaintEffectPreferNoSchedule && t.Key != karpv1.UnregisteredTaintKey
	}, false); bad {
		return fmt.Sprintf("taint %v not tolerated", taint)
	}
	for _, r := range in.VolumeRequirements[pod.UID] {
		sel, _ := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{r}}}})
		if !sel.Match(n.node) {
			return fmt.Sprintf("volume requires %v", r)
		}
	}
	ports := map[string]bool{}
	for _, other := range bound[n] {
		for _, c := range other.Spec.Containers {
			for _, p := range c.Ports {
				ports[fmt.Sprintf("%s/%d", p.Protocol, p.HostPort)] = p.HostPort != 0
			}
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort != 0 && ports[fmt.Sprintf("%s/%d", p.Protocol, p.HostPort)] {
				return fmt.Sprintf("host port %d in use", p.HostPort)
			}
		}
	}
	a := pod.Spec.Affinity
	if a != nil && a.PodAffinity != nil {
		for _, term := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			d, ok := domain(n, term.TopologyKey)
			found, any := false, false
			for _, m := range cluster {
				for _, other := range bound[m] {
					if !matches(term, pod, other) {
						continue
					}
					any = true
					if md, mok := domain(m, term.TopologyKey); ok && mok && md == d {
						found = true
					}
				}
			}
			if !found && (any || !matches(term, pod, pod) || !ok) {
				return "pod affinity on " + term.TopologyKey + " not satisfied"
			}
		}
	}
	if a != nil && a.PodAntiAffinity != nil {
		for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			d, ok := domain(n, term.TopologyKey)
			for _, m := range cluster {
				if md, mok := domain(m, term.TopologyKey); !ok || !mok || md != d {
					continue
				}
				for _, other := range bound[m] {
					if matches(term, pod, other) {
						return fmt.Sprintf("pod anti-affinity on %s: %s is in %s", term.TopologyKey, other.Name, d)
					}
				}
			}
		}
	}
	for _, m := range cluster {
		for _, owner := range bound[m] {
			oa := owner.Spec.Affinity
			if oa == nil || oa.PodAntiAffinity == nil {
				continue
			}
			for _, term := range oa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				md, mok := domain(m, term.TopologyKey)
				d, ok := domain(n, term.TopologyKey)
				if ok && mok && md == d && matches(term, owner, pod) {
					return fmt.Sprintf("%s's pod anti-affinity on %s", owner.Name, term.TopologyKey)
				}
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
			for _, other := range bound[m] {
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
		self := 0
		if sel.Matches(labels.Set(pod.Labels)) {
			self = 1
		}
		d, ok := domain(n, c.TopologyKey)
		if !ok {
			return fmt.Sprintf("spread on %s: the node has no such label", c.TopologyKey)
		}
		if counts[d]+self-minCount > int(c.MaxSkew) {
			return fmt.Sprintf("spread on %s: skew %d > %d (counts %v)", c.TopologyKey, counts[d]+self-minCount, c.MaxSkew, counts)
		}
	}
	return ""
}
