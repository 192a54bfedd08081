package capacity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/catalog"
)

func m5large(t *testing.T) corev1.ResourceList {
	t.Helper()
	it, ok := catalog.Get("m5.large")
	if !ok {
		t.Fatal("m5.large missing")
	}
	return it.Allocatable
}

func TestEstimateWithoutKubeletIsTheCatalogue(t *testing.T) {
	cat := m5large(t)
	got := Estimate(cat, 2, nil)
	for k, q := range cat {
		if g := got[k]; g.Cmp(q) != 0 {
			t.Errorf("%s = %s, want the catalogue's %s", k, g.String(), q.String())
		}
	}
	if got.Memory().Cmp(resource.MustParse("6903Mi")) != 0 {
		t.Errorf("memory %s", got.Memory())
	}
}

func TestEstimateHonoursKubelet(t *testing.T) {
	cat := m5large(t) // cpu 1930m, memory 6903Mi, pods 29
	for _, tc := range []struct {
		name              string
		kubelet           v1.KubeletConfiguration
		cpu, memory, pods string
	}{
		// maxPods 10: kube-reserved memory 11·10+255 = 365Mi instead of 574Mi.
		{"maxPods", v1.KubeletConfiguration{MaxPods: new(int32(10))}, "1930m", "7112Mi", "10"},
		// podsPerCore 4 on 2 vCPUs caps pods at 8: 11·8+255 = 343Mi.
		{"podsPerCore", v1.KubeletConfiguration{PodsPerCore: new(int32(4))}, "1930m", "7134Mi", "8"},
		// kubeReserved replaces the default (70m, 574Mi); systemReserved adds.
		{"reserved", v1.KubeletConfiguration{
			KubeReserved:   map[string]string{"cpu": "200m", "memory": "1Gi"},
			SystemReserved: map[string]string{"cpu": "100m", "memory": "500Mi"},
		}, "1700m", "5953Mi", "29"},
		// evictionHard 500Mi instead of 100Mi.
		{"evictionHard", v1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "500Mi"}}, "1930m", "6503Mi", "29"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Estimate(cat, 2, &tc.kubelet)
			for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: tc.cpu, corev1.ResourceMemory: tc.memory, corev1.ResourcePods: tc.pods} {
				if q := got[name]; q.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("%s = %s, want %s", name, q.String(), want)
				}
			}
		})
	}
	// A percentage threshold is of the catalogue memory.
	got := Estimate(cat, 2, &v1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "10%"}})
	want := cat.Memory().Value() + 100*1024*1024 - cat.Memory().Value()/10
	if got.Memory().Value() != want {
		t.Errorf("10%% eviction: memory %d, want %d", got.Memory().Value(), want)
	}
}

func TestCacheLearnsPerKey(t *testing.T) {
	est := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("6903Mi")}
	real := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("5879Mi")}
	std, nvidia := Key{"m5.large", "ami-std"}, Key{"m5.large", "ami-nvidia"}
	c := New()
	if got := c.Allocatable(std, est); got.Memory().Cmp(*est.Memory()) != 0 {
		t.Fatalf("before any Node: %v", got)
	}
	c.Observe(std, "node-a", real)
	if got := c.Allocatable(std, est); got.Memory().Cmp(*real.Memory()) != 0 {
		t.Errorf("after observing: %s, want %s", got.Memory(), real.Memory())
	}
	if got := c.Allocatable(nvidia, est); got.Memory().Cmp(*est.Memory()) != 0 {
		t.Errorf("another AMI of the same type got %s, want the estimate", got.Memory())
	}
	entries := c.Entries()
	if len(entries) != 2 || entries[1].Key != std || entries[1].Observed == nil || entries[1].Observed.Node != "node-a" || entries[0].Observed != nil {
		t.Errorf("entries %+v", entries)
	}
}
