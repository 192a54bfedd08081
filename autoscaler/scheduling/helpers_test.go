package scheduling_test

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/catalog"
)

// Test fixtures built from the real catalogue: every type is offered in
// us-east-1a/b/c, on-demand at the catalogue price and spot at 35% of it
// (36% and 37% in zones b and c, so zones differ in price). Types the
// catalogue has no price for get no offerings, so Solve drops them.
var (
	zones        = []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	spotFraction = []float64{0.35, 0.36, 0.37}

	catalogOnce  sync.Once
	catalogTypes []*cloudprovider.InstanceType
)

// allTypes returns a fresh slice of every catalogue type (1,363) as
// cloudprovider instance types. The *InstanceType values are shared between
// calls; tests that change offerings must use withOfferings.
func allTypes() []*cloudprovider.InstanceType {
	catalogOnce.Do(func() {
		for _, c := range catalog.All() {
			it := &cloudprovider.InstanceType{
				Name:        c.Name,
				Labels:      c.Labels,
				Capacity:    c.Capacity(),
				Allocatable: c.Allocatable,
			}
			if c.OnDemandPriceUSDPerHour != nil {
				price := *c.OnDemandPriceUSDPerHour
				for i, z := range zones {
					it.Offerings = append(it.Offerings,
						cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, PriceUSDPerHour: price, Available: true},
						cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeSpot, PriceUSDPerHour: price * spotFraction[i], Available: true})
				}
			}
			catalogTypes = append(catalogTypes, it)
		}
	})
	return append([]*cloudprovider.InstanceType(nil), catalogTypes...)
}

// withOfferings returns copies of types whose offerings are rewritten by f.
func withOfferings(types []*cloudprovider.InstanceType, f func(cloudprovider.Offering) cloudprovider.Offering) []*cloudprovider.InstanceType {
	out := make([]*cloudprovider.InstanceType, len(types))
	for i, it := range types {
		cp := *it
		cp.Offerings = nil
		for _, o := range it.Offerings {
			cp.Offerings = append(cp.Offerings, f(o))
		}
		out[i] = &cp
	}
	return out
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

// generalPurpose is Karpenter's "general-purpose" example NodePool:
// amd64, linux, on-demand, categories c/m/r, generation > 2.
func generalPurpose() *karpv1.NodePool {
	return nodePool("general-purpose",
		req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
		req(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"),
		req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand"),
		req(catalog.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r"),
		req("karpenter.k8s.aws/instance-generation", corev1.NodeSelectorOpGt, "2"),
	)
}

func nodePool(name string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			Requirements: reqs,
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		}}},
	}
}

type podOption func(*corev1.Pod)

func pod(name, cpu, memory string, opts ...podOption) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse(memory),
			}},
		}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func pods(n int, prefix, cpu, memory string, opts ...podOption) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = pod(fmt.Sprintf("%s-%03d", prefix, i), cpu, memory, opts...)
	}
	return out
}

func nodeSelector(kv ...string) podOption {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func toleration(key, value string, effect corev1.TaintEffect) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpEqual, Value: value, Effect: effect})
	}
}

// affinity adds required node affinity terms (ORed), each a list of
// expressions (ANDed).
func affinity(terms ...[]corev1.NodeSelectorRequirement) podOption {
	return func(p *corev1.Pod) {
		ns := &corev1.NodeSelector{}
		for _, t := range terms {
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}}
	}
}

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func resources(kv ...string) corev1.ResourceList {
	rl := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		rl[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return rl
}
