package podcache

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func pod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
}

func names(pods []*corev1.Pod) map[string]string {
	m := map[string]string{}
	for _, p := range pods {
		m[p.Name] = p.Spec.NodeName
	}
	return m
}

// Without a Lister (a fake client), List falls back to client.List and
// returns every pod.
func TestListFallsBackToClientList(t *testing.T) {
	kube := fake.NewClientBuilder().WithObjects(pod("a", "n1"), pod("b", "")).Build()
	pods, err := List(context.Background(), kube)
	if err != nil {
		t.Fatal(err)
	}
	got := names(pods)
	if len(got) != 2 || got["a"] != "n1" || got["b"] != "" {
		t.Fatalf("List = %v, want a on n1 and b unbound", got)
	}
}

// With a Client, List returns the store's own objects (the same pointers,
// no copies) and does not call the wrapped client.
func TestListReturnsStorePointers(t *testing.T) {
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	a, b := pod("a", "n1"), pod("b", "n2")
	for _, p := range []*corev1.Pod{a, b} {
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	// The wrapped client holds a different pod: List must not read it.
	c := &Client{Client: fake.NewClientBuilder().WithObjects(pod("other", "n3")).Build(), store: store}
	var reader client.Reader = c
	pods, err := List(context.Background(), reader)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 {
		t.Fatalf("List returned %d pods, want the store's 2: %v", len(pods), names(pods))
	}
	for _, p := range pods {
		if p != a && p != b {
			t.Fatalf("pod %s is not the store's object (a copy or the client's)", p.Name)
		}
	}
}

// A store holding something other than pods is an error, not a panic.
func TestListPodsRejectsOtherObjects(t *testing.T) {
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	if err := store.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Client{store: store}).ListPods(context.Background()); err == nil {
		t.Fatal("ListPods over a store of Nodes returned no error")
	}
}
