package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// Baseline is what a cluster held when Snapshot was taken: Reset deletes
// every object created since, so that the next test sharing the control
// plane starts from the same state (no NodePool, NodeClaim, Node,
// EC2NodeClass, workload, namespace, lease or webhook configuration of
// the test before).
type Baseline struct {
	c    *Cluster
	uids map[types.UID]bool
}

// resetSkipped are the resources Reset leaves alone: the control plane's
// own API registrations and flow-control objects (the API server
// re-creates those it owns), and CRDs (a CRD a test installed does no
// harm to the next one; its objects are deleted like any others).
var resetSkipped = []string{
	"customresourcedefinitions.apiextensions.k8s.io",
	"apiservices.apiregistration.k8s.io",
	"flowschemas.flowcontrol.apiserver.k8s.io",
	"prioritylevelconfigurations.flowcontrol.apiserver.k8s.io",
}

// ResetTimeout bounds Reset: how long it keeps deleting and waiting for
// objects (a namespace's finalization by kube-controller-manager takes a
// few seconds) before it gives up and returns what is left.
const ResetTimeout = 2 * time.Minute

// Snapshot records the objects of every listable resource of c (by UID).
func (c *Cluster) Snapshot(ctx context.Context) (*Baseline, error) {
	b := &Baseline{c: c, uids: map[types.UID]bool{}}
	err := b.each(ctx, func(_ schema.GroupVersionResource, _ bool, items []metav1.PartialObjectMetadata) error {
		for _, it := range items {
			b.uids[it.UID] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot of cluster %s: %w", c.Name, err)
	}
	return b, nil
}

// Reset deletes every object created since the Snapshot (finalizers
// removed first, no grace period, workload controllers first so that they
// re-create nothing) and waits until they are gone. Every tenth pass
// (about 5 s) it reports through logf (may be nil) what is still there.
// It returns an error naming what is left after ResetTimeout; the cluster
// is then no longer fit to be shared.
func (b *Baseline) Reset(ctx context.Context, logf func(format string, args ...any)) error {
	ctx, cancel := context.WithTimeout(ctx, ResetTimeout)
	defer cancel()
	var left []string
	pass := 0
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		left, err = b.deleteNew(ctx)
		if err != nil {
			left = append(left, err.Error())
		}
		if pass++; pass%10 == 0 && len(left) > 0 && logf != nil {
			logf("resetting cluster %s, pass %d: %d objects left, first %s", b.c.Name, pass, len(left), strings.Join(left[:min(len(left), 5)], ", "))
		}
		return len(left) == 0, nil
	})
	if err != nil {
		if len(left) > 10 {
			left = append(left[:10], fmt.Sprintf("and %d more", len(left)-10))
		}
		return fmt.Errorf("resetting cluster %s: objects left after %s: %s", b.c.Name, ResetTimeout, strings.Join(left, ", "))
	}
	return nil
}

// deleteNew makes one pass: it deletes the objects not in the baseline and
// returns those it saw (a pass that sees none is the last).
func (b *Baseline) deleteNew(ctx context.Context) ([]string, error) {
	md, err := b.metadataClient()
	if err != nil {
		return nil, err
	}
	var (
		mu   sync.Mutex
		left []string
		// busy are the namespaces that held objects to delete in this
		// pass: they are deleted in a later pass, once empty, because
		// kube-controller-manager backs off (up to about a minute) on
		// a terminating namespace that still has content.
		busy = map[string]bool{}
	)
	err = b.each(ctx, func(gvr schema.GroupVersionResource, namespaced bool, items []metav1.PartialObjectMetadata) error {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(16)
		for _, it := range items {
			if b.uids[it.UID] {
				continue
			}
			mu.Lock()
			left = append(left, gvr.Resource+" "+strings.TrimPrefix(it.Namespace+"/"+it.Name, "/"))
			if it.Namespace != "" && !recreatedInEveryNamespace(gvr, it.Name) {
				busy[it.Namespace] = true
			}
			waitForContent := gvr.Resource == "namespaces" && busy[it.Name]
			mu.Unlock()
			if waitForContent {
				continue
			}
			g.Go(func() error {
				var r metadata.ResourceInterface = md.Resource(gvr)
				if namespaced {
					r = md.Resource(gvr).Namespace(it.Namespace)
				}
				if len(it.Finalizers) > 0 && gvr.Resource != "namespaces" {
					patch := fmt.Appendf(nil, `{"metadata":{"finalizers":null,"resourceVersion":%q}}`, it.ResourceVersion)
					if _, err := r.Patch(gctx, it.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
						return fmt.Errorf("removing the finalizers of %s %s/%s: %w", gvr.Resource, it.Namespace, it.Name, err)
					}
				}
				// Also when it is already terminating: a pod deleted
				// gracefully (a DaemonSet's, by the garbage collector)
				// whose Node is gone waits for pod GC otherwise; no
				// grace period removes it at once.
				err := r.Delete(gctx, it.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && !apierrors.IsMethodNotSupported(err) {
					return fmt.Errorf("deleting %s %s/%s: %w", gvr.Resource, it.Namespace, it.Name, err)
				}
				return nil
			})
		}
		return g.Wait()
	})
	return left, err
}

// recreatedInEveryNamespace reports whether kube-controller-manager
// re-creates the object in every namespace that is not terminating (the
// ServiceAccount "default", the ConfigMap "kube-root-ca.crt"): such an
// object goes with its namespace and does not hold the namespace's
// deletion back.
func recreatedInEveryNamespace(gvr schema.GroupVersionResource, name string) bool {
	return gvr.Group == "" && (gvr.Resource == "serviceaccounts" && name == "default" || gvr.Resource == "configmaps" && name == "kube-root-ca.crt")
}

// each lists every resource of the cluster that can be listed and
// deleted, workload controllers first and namespaces last, and calls fn
// with its objects' metadata.
func (b *Baseline) each(ctx context.Context, fn func(gvr schema.GroupVersionResource, namespaced bool, items []metav1.PartialObjectMetadata) error) error {
	dc, err := discovery.NewDiscoveryClientForConfig(b.c.RESTConfig)
	if err != nil {
		return err
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return fmt.Errorf("discovering resources: %w", err)
	}
	type res struct {
		gvr        schema.GroupVersionResource
		namespaced bool
	}
	var all []res
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return err
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			if slices.Contains(resetSkipped, gvr.GroupResource().String()) {
				continue
			}
			all = append(all, res{gvr, r.Namespaced})
		}
	}
	rank := func(r res) int {
		switch {
		// Webhook configurations first (their webhook is gone with the
		// test), then the controllers that would re-create pods.
		case r.gvr.Group == "admissionregistration.k8s.io" || r.gvr.Group == "apps" || r.gvr.Group == "batch":
			return 0
		case r.gvr.Resource == "namespaces":
			return 2
		}
		return 1
	}
	sort.SliceStable(all, func(i, j int) bool { return rank(all[i]) < rank(all[j]) })
	md, err := b.metadataClient()
	if err != nil {
		return err
	}
	for _, r := range all {
		list, err := md.Resource(r.gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			continue // a CRD deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("listing %s: %w", r.gvr, err)
		}
		if err := fn(r.gvr, r.namespaced, list.Items); err != nil {
			return err
		}
	}
	return nil
}

// metadataClient is a metadata-only client of the cluster with a higher
// rate limit than the tests' (Reset deletes hundreds of pods and events
// at once) and without the API server's deprecation warnings (listing
// v1 Endpoints draws one per pass; printed into the test's log, they
// pushed the failure that triggered the cleanup out of CI's excerpt).
func (b *Baseline) metadataClient() (metadata.Interface, error) {
	if b.c.RESTConfig == nil {
		return nil, errors.New("cluster has no RESTConfig")
	}
	cfg := *b.c.RESTConfig
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.WarningHandler = rest.NoWarnings{}
	return metadata.NewForConfig(&cfg)
}
