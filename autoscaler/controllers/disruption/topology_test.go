package disruption_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// TestConsolidationHonoursNamespaceSelector: node a runs an api pod whose
// hostname anti-affinity selects app=db pods in namespaces labelled
// tier=storage; node b runs a db pod in namespace storage. Both half
// empty, either could take the other's pod but for the anti-affinity.
// With the namespace labelled tier=storage consolidation's simulation
// resolves the namespaceSelector and keeps both nodes (the old behaviour
// dropped the term and moved the db pod next to the api pod); labelled
// otherwise, one node goes.
func TestConsolidationHonoursNamespaceSelector(t *testing.T) {
	for _, tt := range []struct {
		tier     string
		keepBoth bool
	}{{"storage", true}, {"web", false}} {
		t.Run("tier="+tt.tier, func(t *testing.T) {
			c := newCluster(t)
			c.pool("p", karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, 0, "100%")
			a := c.node("a", "p", time.Hour, nil)
			b := c.node("b", "p", time.Hour, nil)
			c.objs = append(c.objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "storage", Labels: map[string]string{"tier": tt.tier}}})
			api := runningPod("api", "default", a, "500m", map[string]string{"app": "api"})
			api.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey:       corev1.LabelHostname,
					LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "storage"}},
				}},
			}}
			c.objs = append(c.objs, api, runningPod("db", "storage", b, "600m", map[string]string{"app": "db"}))
			res := c.pass()
			if kept := c.exists("a") && c.exists("b"); kept != tt.keepBoth {
				t.Fatalf("decisions %v: both nodes kept = %t, want %t", res.Decisions, kept, tt.keepBoth)
			}
		})
	}
}

func runningPod(name, namespace, node, cpu string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels, UID: types.UID(namespace + "-" + name)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}
