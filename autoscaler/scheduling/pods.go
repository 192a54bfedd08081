package scheduling

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// podInfo is what the pipeline needs to know about one pod (one
// relaxation variant of it), computed once.
type podInfo struct {
	pod *corev1.Pod
	// view is the pod as Solve schedules it: pod itself, or a copy whose
	// preferences are made required (see variants). Constraints are read
	// from view; placements report pod.
	view *corev1.Pod
	// nodeAffinity is view's nodeSelector and required node affinity, for
	// matching existing nodes.
	nodeAffinity nodeaffinity.RequiredNodeAffinity
	// volume are the pod's volume requirements (Input.VolumeRequirements),
	// ANDed into every term.
	volume []requirement
	// ports are the host ports the pod binds.
	ports hostPorts
	// constraints are view's topology constraints; counted are the groups
	// whose selector matches the pod. Both are set by the solver.
	constraints []constraint
	counted     []*group
	// owns are the groups of the pod's own required anti-affinity terms
	// (of pod, not view), recorded as owners where it lands.
	owns []*group
	// requests are the pod's effective requests plus pods=1 (podRequests).
	requests corev1.ResourceList
	vec      vector
	// terms are the pod's alternatives for a new node: its required node
	// affinity terms (ORed), each ANDed with its nodeSelector. A pod without
	// node affinity has one term, its nodeSelector (possibly empty).
	terms []podTerm
	// termsErr is set when the pod's requirements cannot be parsed or no
	// term can match a node that does not exist yet.
	termsErr error
	// signature identifies the pod's scheduling constraints (nodeSelector,
	// required node affinity, tolerations): pods with the same signature
	// are compatible with the same NodePools and offerings, so the filter
	// step runs once per signature and NodePool.
	signature string
}

// podTerm is one alternative set of node requirements (ANDed) of a pod.
type podTerm struct {
	exprs []requirement
}

// uid returns the key of pod in Result.Unschedulable.
func uid(pod *corev1.Pod) types.UID {
	if pod.UID != "" {
		return pod.UID
	}
	return types.UID(pod.Namespace + "/" + pod.Name)
}

// newPodInfo computes the requests, terms and signature of pod scheduled
// as view (see variants), with volume requirements vol.
func newPodInfo(pod, view *corev1.Pod, vol []corev1.NodeSelectorRequirement) *podInfo {
	pi := &podInfo{pod: pod, view: view, requests: podRequests(pod), ports: podHostPorts(pod)}
	pi.nodeAffinity = nodeaffinity.GetRequiredNodeAffinity(view)
	for _, e := range vol {
		r, err := newRequirement(e.Key, e.Operator, e.Values, nil, "volume topology "+describeExpression(e.Key, e.Operator, e.Values))
		if err != nil {
			pi.termsErr = err
			break
		}
		pi.volume = append(pi.volume, r)
	}
	if pi.termsErr == nil {
		pi.terms, pi.termsErr = podTerms(view)
		for i := range pi.terms {
			pi.terms[i].exprs = append(pi.terms[i].exprs, pi.volume...)
		}
	}
	pi.signature = podSignature(view)
	if len(vol) > 0 {
		pi.signature += fmt.Sprintf("|vol%v", vol)
	}
	return pi
}

// podTerms turns a pod's nodeSelector and required node affinity into
// alternatives. A term using matchFields (metadata.name) can only match an
// existing node, so it is skipped for new nodes.
func podTerms(pod *corev1.Pod) ([]podTerm, error) {
	var selector []requirement
	for _, k := range slices.Sorted(maps.Keys(pod.Spec.NodeSelector)) {
		v := pod.Spec.NodeSelector[k]
		r, err := newRequirement(k, corev1.NodeSelectorOpIn, []string{v}, nil, fmt.Sprintf("nodeSelector %s=%s", k, v))
		if err != nil {
			return nil, err
		}
		selector = append(selector, r)
	}
	affinity := pod.Spec.Affinity
	if affinity == nil || affinity.NodeAffinity == nil || affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return []podTerm{{exprs: selector}}, nil
	}
	nodeSelectorTerms := affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	var terms []podTerm
	for _, t := range nodeSelectorTerms {
		if len(t.MatchFields) > 0 || len(t.MatchExpressions) == 0 {
			// matchFields names an existing node; an empty term matches
			// nothing (Kubernetes semantics).
			continue
		}
		exprs := append([]requirement(nil), selector...)
		for _, e := range t.MatchExpressions {
			r, err := newRequirement(e.Key, e.Operator, e.Values, nil, "node affinity "+describeExpression(e.Key, e.Operator, e.Values))
			if err != nil {
				return nil, err
			}
			exprs = append(exprs, r)
		}
		terms = append(terms, podTerm{exprs: exprs})
	}
	if len(terms) == 0 {
		return nil, errors.New("required node affinity has no term a new node can match (terms are empty or use matchFields, which names an existing node)")
	}
	return terms, nil
}

// podSignature renders the pod's nodeSelector, required node affinity and
// tolerations canonically (fmt prints maps sorted by key).
func podSignature(pod *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v|", pod.Spec.NodeSelector)
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		fmt.Fprintf(&b, "%v", a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)
	}
	b.WriteString("|")
	for _, t := range pod.Spec.Tolerations {
		fmt.Fprintf(&b, "%s,%s,%s,%s;", t.Key, t.Operator, t.Value, t.Effect)
	}
	return b.String()
}

// blockingTaint returns the first taint in taints that keeps pod off a node
// and true, or false when the pod tolerates them all. PreferNoSchedule taints
// never block. karpenter.sh/unregistered blocks as it does for the
// kube-scheduler: callers leave it out of the taints of a node they will
// register (clusterstate.ExistingNodes does), so it blocks only on a Node
// nobody will register. Taint comparison operators (an alpha Kubernetes
// 1.35 feature) are off, the Kubernetes default.
func blockingTaint(taints []corev1.Taint, tolerations []corev1.Toleration) (corev1.Taint, bool) {
	return corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), taints, tolerations, func(t *corev1.Taint) bool {
		return t.Effect != corev1.TaintEffectPreferNoSchedule
	}, false)
}

// describeTaint renders a taint as kubectl does: key=value:Effect.
func describeTaint(t corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// sortForPacking orders pods for first-fit decreasing: by cpu request, then
// memory request, both descending, then by namespace, name and UID so the
// order is the same for the same input.
func sortForPacking(pods []*podInfo) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if c := cmpQuantity(a.requests, b.requests, corev1.ResourceCPU); c != 0 {
			return c > 0
		}
		if c := cmpQuantity(a.requests, b.requests, corev1.ResourceMemory); c != 0 {
			return c > 0
		}
		if a.pod.Namespace != b.pod.Namespace {
			return a.pod.Namespace < b.pod.Namespace
		}
		if a.pod.Name != b.pod.Name {
			return a.pod.Name < b.pod.Name
		}
		return a.pod.UID < b.pod.UID
	})
}

func cmpQuantity(a, b corev1.ResourceList, name corev1.ResourceName) int {
	qa, qb := a[name], b[name]
	return qa.Cmp(qb)
}
