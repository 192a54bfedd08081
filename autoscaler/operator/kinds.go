package operator

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/karpenter/pkg/apis"
)

// KindsTimeout is how long the operator waits at start for the API server
// to serve the kinds it indexes (servedKinds), the same bound as
// DiscoveryTimeout: 2 minutes.
const KindsTimeout = DiscoveryTimeout

// kindsPollInterval is how often waitForKinds asks again: 1 second.
const kindsPollInterval = time.Second

// servedKinds are the kinds the operator indexes before its manager
// starts (clusterstate.IndexFields, the interruption controller's index):
// controller-runtime's IndexField fails at once when the API server does
// not serve the kind, where its watches wait for it.
var servedKinds = []schema.GroupVersionKind{
	{Group: apis.Group, Version: "v1", Kind: "NodeClaim"},
	{Group: apis.Group, Version: "v1", Kind: "NodePool"},
}

// waitForKinds waits until mapper maps every one of kinds, asking every
// interval for at most timeout. An API server that has just restarted
// serves its CustomResourceDefinitions a moment after it answers (the
// apiextensions server registers them as it reads them back): a process
// started then, as a crash-looping or rescheduled controller is, would
// otherwise exit with "no matches for kind". It logs once per kind it
// waits for. It returns nil once all are mapped, ctx's error when ctx
// ends, or, after timeout, an error naming the first kind still missing,
// its last mapping error and the fix (install karpx's CRDs). It waits in
// wall time, not on Options.Clock: the API server serves the CRDs in wall
// time, and a fake clock that no test steps this early would wait for good
// (test/architecture's wallClockAllowed).
func waitForKinds(ctx context.Context, mapper meta.RESTMapper, interval, timeout time.Duration, kinds ...schema.GroupVersionKind) error {
	log := logr.FromContextOrDiscard(ctx)
	deadline, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, gvk := range kinds {
		var last error
		logged := false
		err := wait.PollUntilContextCancel(deadline, interval, true, func(context.Context) (bool, error) {
			if _, last = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); last == nil {
				return true, nil
			}
			if !logged {
				log.Info("waiting for the API server to serve a kind", "kind", gvk.String(), "error", last.Error())
				logged = true
			}
			return false, nil
		})
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("the API server does not serve %s after %s (install karpx's CRDs: manifests/crds, or the chart's crds/): %w", gvk, timeout, last)
	}
	return nil
}
