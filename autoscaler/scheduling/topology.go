package scheduling

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// The topology keys with fixed indexes, kept on fast paths (bitmasks in
// fixed-size arrays). Zone and capacity type are offering labels: a new
// node's value is chosen by pinning its plan to one value. Hostname is one
// domain per node (existing or planned). Any other key (an instance type
// label such as karpenter.k8s.aws/instance-family, a NodePool template
// label or requirement key) gets the next index when a pod first names it:
// see topology.keyIndex and topology_keys.go.
const (
	keyZone = iota
	keyCapacityType
	keyHostname
	numTopologyKeys
)

// topologyKeys are the label keys of keyZone, keyCapacityType and
// keyHostname.
var topologyKeys = [numTopologyKeys]string{corev1.LabelTopologyZone, karpv1.CapacityTypeLabelKey, corev1.LabelHostname}

// normalizeKey maps a deprecated label key to the one Karpenter uses
// (failure-domain.beta.kubernetes.io/zone → topology.kubernetes.io/zone,
// karpv1.NormalizedLabels).
func normalizeKey(key string) string {
	if n, ok := karpv1.NormalizedLabels[key]; ok {
		return n
	}
	return key
}

// maxDomainValues is how many zone (or capacity type) values the solver
// tracks, one bit each in a uint64; a region has far fewer zones.
const maxDomainValues = 64

// allValues is a domain value set with every value allowed.
const allValues = ^uint64(0)

// groupKind is what a topology group constrains.
type groupKind int

const (
	kindSpread       groupKind = iota // topologySpreadConstraints, DoNotSchedule
	kindAffinity                      // required pod affinity
	kindAntiAffinity                  // required pod anti-affinity
)

// group counts, per domain of one topology key, the pods that match one
// label selector in a set of namespaces. Pods whose constraint has the same
// kind, key, namespaces and selector share a group.
type group struct {
	kind groupKind
	key  int
	// namespaces are the namespaces whose pods count (nil: every
	// namespace), besides those nsSelector selects.
	namespaces map[string]struct{}
	// nsSelector (pod (anti-)affinity terms only) selects more namespaces
	// by their labels, nsLabels (Input.NamespaceLabels); nil: none.
	nsSelector labels.Selector
	nsLabels   map[string]map[string]string
	selector   labels.Selector
	// maxSkew and minDomains are the spread constraint's (kindSpread).
	maxSkew, minDomains int
	// honorAffinity and honorTaints are the spread constraint's
	// nodeAffinityPolicy and nodeTaintsPolicy (kindSpread): whether the
	// pod's node affinity and tolerations decide which domains count.
	honorAffinity, honorTaints bool

	// counts[d] is the number of matching pods in domain d; total is their
	// sum.
	counts domainCounts
	total  int
	// owners[d] is the number of pods in domain d that carry this
	// anti-affinity term (kindAntiAffinity): a matching pod may not join
	// them.
	owners domainCounts
	// description names the constraint in error messages.
	description string
}

// matches reports whether pod is counted by the group.
func (g *group) matches(pod *corev1.Pod) bool {
	if g.namespaces != nil {
		if _, ok := g.namespaces[pod.Namespace]; !ok && (g.nsSelector == nil || !g.nsSelector.Matches(labels.Set(g.nsLabels[pod.Namespace]))) {
			return false
		}
	}
	return g.selector.Matches(labels.Set(pod.Labels))
}

// constraint is one of a pod's topology constraints.
type constraint struct {
	g *group
	// self: the pod matches its own selector (it counts toward its spread,
	// and may be the first pod of a self-affine group).
	self bool
}

// domainIndex interns the values of one topology key.
type domainIndex struct {
	names []string
	index map[string]int
}

func (d *domainIndex) intern(v string) int {
	if i, ok := d.index[v]; ok {
		return i
	}
	d.index[v] = len(d.names)
	d.names = append(d.names, v)
	return len(d.names) - 1
}

// topology holds the groups and domains of one Solve call.
type topology struct {
	// keys are the topology keys by index: the numTopologyKeys fixed ones,
	// then every other key a pod's constraint names, in the order first
	// seen; keyIdx inverts it; domains[k] interns the values of keys[k].
	keys    []string
	keyIdx  map[string]int
	domains []*domainIndex
	// nsLabels are Input.NamespaceLabels, for namespaceSelector.
	nsLabels map[string]map[string]string
	groups   map[string]*group
	// list is groups in creation order, for deterministic matching.
	list []*group
	// universe caches, per pod signature and spread policy, the domains a
	// spread constraint's skew is computed over.
	universe map[string]uint64
	// extraUniverse is universe for keys past the fixed ones: a flag per
	// domain index.
	extraUniverse map[string][]bool
}

func newTopology(nsLabels map[string]map[string]string) *topology {
	t := &topology{groups: map[string]*group{}, universe: map[string]uint64{}, extraUniverse: map[string][]bool{},
		keyIdx: map[string]int{}, nsLabels: nsLabels}
	for _, k := range topologyKeys {
		t.keyIndex(k)
	}
	return t
}

// keyIndex returns the index of a topology key (normalised), registering
// it when new.
func (t *topology) keyIndex(key string) int {
	key = normalizeKey(key)
	if i, ok := t.keyIdx[key]; ok {
		return i
	}
	t.keyIdx[key] = len(t.keys)
	t.keys = append(t.keys, key)
	t.domains = append(t.domains, &domainIndex{index: map[string]int{}})
	return len(t.keys) - 1
}

// internValues registers the values of a key in sorted order, so domain
// indexes (and tie-breaks between them) do not depend on input order. Zone
// and capacity type keep at most maxDomainValues values (one bit each);
// other keys are unbounded.
func (t *topology) internValues(key int, values map[string]struct{}) {
	for _, v := range sortedKeys(values) {
		if key >= numTopologyKeys || len(t.domains[key].names) < maxDomainValues {
			t.domains[key].intern(v)
		}
	}
}

// valueIndex returns the domain index of value v of key, or -1 when it is
// not tracked.
func (t *topology) valueIndex(key int, v string) int {
	if i, ok := t.domains[key].index[v]; ok {
		return i
	}
	return -1
}

// nodeDomains is a node's (or plan's) domain index per topology key; -1:
// label absent or value not known yet.
type nodeDomains struct {
	fixed [numTopologyKeys]int
	// extra[i] is the domain of key numTopologyKeys+i (nil when no pod
	// names another key).
	extra []int
}

// of returns the domain of key k.
func (d *nodeDomains) of(k int) int {
	if k < numTopologyKeys {
		return d.fixed[k]
	}
	if i := k - numTopologyKeys; i < len(d.extra) {
		return d.extra[i]
	}
	return -1
}

// podConstraints parses the pod's topology spread constraints
// (DoNotSchedule; ScheduleAnyway ones only when the pod is a relaxation
// variant that made them required) and required pod (anti)-affinity terms
// into groups, creating groups (and topology keys) as needed. Constraints
// with an invalid selector are skipped (Unsupported reports them).
func (t *topology) podConstraints(pod *corev1.Pod) []constraint {
	var out []constraint
	add := func(g *group) {
		if g != nil {
			out = append(out, constraint{g: g, self: g.matches(pod)})
		}
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			add(t.spreadGroup(pod, c))
		}
	}
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			for _, term := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				add(t.termGroup(pod, kindAffinity, term))
			}
		}
		if a.PodAntiAffinity != nil {
			for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				add(t.termGroup(pod, kindAntiAffinity, term))
			}
		}
	}
	return out
}

// spreadGroup returns the group of one topology spread constraint, or nil
// when its selector is invalid.
func (t *topology) spreadGroup(pod *corev1.Pod, c corev1.TopologySpreadConstraint) *group {
	if c.TopologyKey == "" {
		return nil
	}
	key := t.keyIndex(c.TopologyKey)
	sel, ok := selectorWithKeys(c.LabelSelector, pod, c.MatchLabelKeys, nil)
	if !ok {
		return nil
	}
	minDomains := 1
	if c.MinDomains != nil && *c.MinDomains > 1 {
		minDomains = int(*c.MinDomains)
	}
	g := &group{
		kind: kindSpread, key: key, selector: sel,
		namespaces:    map[string]struct{}{pod.Namespace: {}},
		maxSkew:       max(int(c.MaxSkew), 1),
		minDomains:    minDomains,
		honorAffinity: c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor,
		honorTaints:   c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor,
		description:   fmt.Sprintf("topology spread on %s (maxSkew %d, selector %s)", t.keys[key], c.MaxSkew, sel),
	}
	return t.intern(g)
}

// termGroup returns the group of one required pod (anti-)affinity term, or
// nil when its selector or namespaceSelector is invalid. The namespaces
// counted are, as in the kube-scheduler's InterPodAffinity plugin, the
// term's namespaces plus those whose labels (Input.NamespaceLabels) its
// namespaceSelector selects; an empty namespaceSelector ({}) selects every
// namespace; neither set means the pod's own namespace.
func (t *topology) termGroup(pod *corev1.Pod, kind groupKind, term corev1.PodAffinityTerm) *group {
	if term.TopologyKey == "" {
		return nil
	}
	key := t.keyIndex(term.TopologyKey)
	sel, ok := selectorWithKeys(term.LabelSelector, pod, term.MatchLabelKeys, term.MismatchLabelKeys)
	if !ok {
		return nil
	}
	g := &group{kind: kind, key: key, selector: sel}
	switch {
	case term.NamespaceSelector != nil && emptySelector(term.NamespaceSelector):
		// An empty namespaceSelector selects every namespace.
	default:
		g.namespaces = map[string]struct{}{}
		for _, ns := range term.Namespaces {
			g.namespaces[ns] = struct{}{}
		}
		if term.NamespaceSelector != nil {
			nsSel, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector)
			if err != nil {
				return nil
			}
			g.nsSelector, g.nsLabels = nsSel, t.nsLabels
		} else if len(term.Namespaces) == 0 {
			g.namespaces[pod.Namespace] = struct{}{}
		}
	}
	what := "pod affinity"
	if kind == kindAntiAffinity {
		what = "pod anti-affinity"
	}
	g.description = fmt.Sprintf("%s on %s (selector %s)", what, t.keys[key], sel)
	return t.intern(g)
}

// intern returns the existing group equal to g, or registers g.
func (t *topology) intern(g *group) *group {
	ns := "*"
	if g.namespaces != nil {
		ns = strings.Join(sortedKeys(g.namespaces), ",")
	}
	if g.nsSelector != nil {
		ns += "|" + g.nsSelector.String()
	}
	sig := fmt.Sprintf("%d|%d|%s|%s|%d|%d|%t|%t", g.kind, g.key, ns, g.selector, g.maxSkew, g.minDomains, g.honorAffinity, g.honorTaints)
	if old, ok := t.groups[sig]; ok {
		return old
	}
	t.groups[sig] = g
	t.list = append(t.list, g)
	return g
}

// emptySelector reports whether s is nil or selects everything.
func emptySelector(s *metav1.LabelSelector) bool {
	return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
}

// selectorWithKeys converts a label selector and adds key=pod's value for
// every matchLabelKeys key and key!=pod's value for every
// mismatchLabelKeys key the pod has, as the kube-scheduler does. A nil
// selector matches nothing.
func selectorWithKeys(ls *metav1.LabelSelector, pod *corev1.Pod, match, mismatch []string) (labels.Selector, bool) {
	if ls == nil {
		return labels.Nothing(), true
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, false
	}
	for _, keys := range []struct {
		keys []string
		op   selection.Operator
	}{{match, selection.Equals}, {mismatch, selection.NotEquals}} {
		for _, k := range keys.keys {
			if v, ok := pod.Labels[k]; ok {
				r, err := labels.NewRequirement(k, keys.op, []string{v})
				if err != nil {
					return nil, false
				}
				sel = sel.Add(*r)
			}
		}
	}
	return sel, true
}

// record counts a placed pod in the domains of its node: dom.of(k) is the
// node's domain index for each key (-1: unknown, not counted).
func (t *topology) record(pi *podInfo, dom *nodeDomains) {
	for _, g := range pi.counted {
		if d := dom.of(g.key); d >= 0 {
			g.counts.inc(d)
			g.total++
		}
	}
	for _, g := range pi.owns {
		if d := dom.of(g.key); d >= 0 {
			g.owners.inc(d)
		}
	}
}

// matchGroups returns the groups that count pod.
func (t *topology) matchGroups(pod *corev1.Pod) []*group {
	var out []*group
	for _, g := range t.list {
		if g.matches(pod) {
			out = append(out, g)
		}
	}
	return out
}

// hasConstraint reports whether g is one of the pod's own constraints.
func (pi *podInfo) hasConstraint(g *group) bool {
	for _, c := range pi.constraints {
		if c.g == g {
			return true
		}
	}
	return false
}

// ownedAntiAffinity returns the groups of pod's own required anti-affinity
// terms: a placed pod blocks matching pods from its domains only through
// these, never through a preference Solve made required for it.
func (t *topology) ownedAntiAffinity(pod *corev1.Pod) []*group {
	var out []*group
	for _, c := range t.podConstraints(pod) {
		if c.g.kind == kindAntiAffinity {
			out = append(out, c.g)
		}
	}
	return out
}

// hasCountedSpread reports whether a strict placement of pi adds spread
// constraints of other pods.
func (pi *podInfo) hasCountedSpread() bool {
	for _, g := range pi.counted {
		if g.kind == kindSpread && !pi.hasConstraint(g) {
			return true
		}
	}
	return false
}

// domainCounts counts pods per domain index; domains never counted are 0.
type domainCounts []int

func (c domainCounts) get(d int) int {
	if d < 0 || d >= len(c) {
		return 0
	}
	return c[d]
}

func (c *domainCounts) inc(d int) {
	if d >= len(*c) {
		*c = append(*c, make([]int, d+1-len(*c))...)
	}
	(*c)[d]++
}

func (c domainCounts) any() bool {
	for _, n := range c {
		if n > 0 {
			return true
		}
	}
	return false
}

// NeedsNamespaceLabels reports whether some pod in pods has a pod
// (anti-)affinity term, required or preferred, with a non-empty
// namespaceSelector: Solve then needs Input.NamespaceLabels. Callers list
// Namespaces only then, so that clusters without such pods keep no
// Namespace informer.
func NeedsNamespaceLabels(pods ...[]*corev1.Pod) bool {
	uses := func(terms []corev1.PodAffinityTerm) bool {
		for _, t := range terms {
			if !emptySelector(t.NamespaceSelector) {
				return true
			}
		}
		return false
	}
	weighted := func(terms []corev1.WeightedPodAffinityTerm) bool {
		for _, t := range terms {
			if !emptySelector(t.PodAffinityTerm.NamespaceSelector) {
				return true
			}
		}
		return false
	}
	for _, list := range pods {
		for _, p := range list {
			if p == nil || p.Spec.Affinity == nil {
				continue
			}
			if a := p.Spec.Affinity.PodAffinity; a != nil && (uses(a.RequiredDuringSchedulingIgnoredDuringExecution) || weighted(a.PreferredDuringSchedulingIgnoredDuringExecution)) {
				return true
			}
			if a := p.Spec.Affinity.PodAntiAffinity; a != nil && (uses(a.RequiredDuringSchedulingIgnoredDuringExecution) || weighted(a.PreferredDuringSchedulingIgnoredDuringExecution)) {
				return true
			}
		}
	}
	return false
}
