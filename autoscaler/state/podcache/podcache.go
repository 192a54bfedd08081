package podcache

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Lister lists every pod of the cluster as pointers to shared, read-only
// objects. It returns an error when the pods cannot be read.
type Lister interface {
	ListPods(ctx context.Context) ([]*corev1.Pod, error)
}

// List returns every pod kube can read, as pointers. When kube is a
// Lister (a Client from New) the pointers are the informer store's own
// objects; otherwise (a fake client in unit tests, an API reader) they
// point into one client.List result. Either way the pods are read-only:
// DeepCopy one before changing it. It returns the list error.
func List(ctx context.Context, kube client.Reader) ([]*corev1.Pod, error) {
	if l, ok := kube.(Lister); ok {
		return l.ListPods(ctx)
	}
	var list corev1.PodList
	if err := kube.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return pods, nil
}

// Client is a controller-runtime client whose reads come from a cache, and
// a Lister reading pods straight from that cache's pod informer store.
type Client struct {
	client.Client
	store toolscache.Store
}

var _ Lister = (*Client)(nil)

// New returns kube (a manager's client, reading from cache) extended with
// ListPods over cache's pod informer, which it registers when missing. It
// returns an error when the informer cannot be obtained or does not expose
// its store (a cache implementation other than controller-runtime's).
func New(ctx context.Context, kube client.Client, cache ctrlcache.Cache) (*Client, error) {
	inf, err := cache.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("getting the pod informer: %w", err)
	}
	withStore, ok := inf.(interface{ GetStore() toolscache.Store })
	if !ok {
		return nil, fmt.Errorf("the pod informer (%T) does not expose its store", inf)
	}
	return &Client{Client: kube, store: withStore.GetStore()}, nil
}

// ListPods returns the pod informer store's objects (read-only; DeepCopy
// before changing one), in no particular order. It returns an error when the
// store holds something other than pods.
func (c *Client) ListPods(ctx context.Context) ([]*corev1.Pod, error) {
	objs := c.store.List()
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok {
			return nil, fmt.Errorf("pod informer store holds a %T", o)
		}
		pods = append(pods, p)
	}
	return pods, nil
}
