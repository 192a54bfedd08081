package capacitytype

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	awscloud "github.com/karpx/karpx/autoscaler/aws/cloudprovider"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// Name is the controller's name, Karpenter's
// (capacitytype/controller.go@v1.14.3 Name).
const Name = "capacityreservation.capacitytype"

// Interval is the time between polls: 1 minute, the RequeueAfter of
// Karpenter's capacitytype controller@v1.14.3.
const Interval = time.Minute

// reservedLabels are the labels only a reserved node carries (Karpenter's
// cloudprovider.ReservedCapacityLabels for AWS@v1.14.3).
var reservedLabels = []string{awscloud.LabelCapacityReservationID, awscloud.LabelCapacityReservationType}

// Lister lists the cluster's instances as NodeClaims with their provider
// ID and current karpenter.sh/capacity-type label (the cloud provider's
// List).
type Lister interface {
	// List returns one NodeClaim per live instance of the cluster.
	List(ctx context.Context) ([]*karpv1.NodeClaim, error)
}

// Options configure the Controller; every field may be zero.
type Options struct {
	// Interval is the time between polls. Default Interval.
	Interval time.Duration
	// Logger is used when Start's context carries none.
	Logger logr.Logger
}

// Controller relabels reserved NodeClaims and Nodes whose instances run
// on-demand now (package doc). It implements manager.Runnable and runs
// only on the leader.
type Controller struct {
	kube  client.Client
	cloud Lister
	clock clock.WithTicker
	opts  Options
}

// New returns a Controller. kube is the manager's cached client; clk
// times the polls.
func New(kube client.Client, cloud Lister, clk clock.WithTicker, opts Options) *Controller {
	if opts.Interval <= 0 {
		opts.Interval = Interval
	}
	return &Controller{kube: kube, cloud: cloud, clock: clk, opts: opts}
}

// NeedLeaderElection makes the Controller run only on the leader.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start polls every Interval until ctx is done. A failed poll is logged
// and retried after Interval.
func (c *Controller) Start(ctx context.Context) error {
	log, err := logr.FromContext(ctx)
	if err != nil {
		log = c.opts.Logger
	}
	log = log.WithName(Name)
	ctx = logr.NewContext(ctx, log)
	for ctx.Err() == nil {
		if _, err := c.Poll(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "syncing capacity types failed; polling again", "after", c.opts.Interval.String())
		}
		select {
		case <-ctx.Done():
		case <-c.clock.After(c.opts.Interval):
		}
	}
	return nil
}

// Poll relabels once and returns the names of the NodeClaims it changed
// (with or without their Node). Errors are the listings' (nothing
// changed) or the joined errors of the patches that failed.
func (c *Controller) Poll(ctx context.Context) ([]string, error) {
	var list karpv1.NodeClaimList
	if err := c.kube.List(ctx, &list, client.MatchingLabels{karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeReserved}); err != nil {
		return nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	// Speculative: never into the budget's reserve; the next poll tries
	// again.
	cloudClaims, err := c.cloud.List(cloudprovider.WithPriority(ctx, cloudprovider.PrioritySpeculative))
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", err)
	}
	now := map[string]string{}
	for _, nc := range cloudClaims {
		now[nc.Status.ProviderID] = nc.Labels[karpv1.CapacityTypeLabelKey]
	}
	var updated []string
	var errs []error
	for i := range list.Items {
		nc := &list.Items[i]
		if !nc.DeletionTimestamp.IsZero() || nc.Status.ProviderID == "" || now[nc.Status.ProviderID] != karpv1.CapacityTypeOnDemand {
			continue
		}
		changed, err := c.sync(ctx, nc)
		if err != nil {
			errs = append(errs, err)
		}
		if changed {
			updated = append(updated, nc.Name)
		}
	}
	if len(updated) > 0 {
		logr.FromContextOrDiscard(ctx).V(1).Info("updated capacity type for nodeclaims", "NodeClaims", updated)
	}
	return updated, errors.Join(errs...)
}

// sync relabels nc and its registered Node as on-demand.
func (c *Controller) sync(ctx context.Context, nc *karpv1.NodeClaim) (bool, error) {
	stored := nc.DeepCopy()
	demote(nc.Labels)
	if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		return false, client.IgnoreNotFound(fmt.Errorf("relabelling NodeClaim %s as on-demand: %w", nc.Name, err))
	}
	if nc.Status.NodeName == "" {
		return true, nil
	}
	var node corev1.Node
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, &node); err != nil {
		return true, client.IgnoreNotFound(fmt.Errorf("getting Node %s of NodeClaim %s: %w", nc.Status.NodeName, nc.Name, err))
	}
	// A Node not registered yet gets its labels from the NodeClaim at
	// registration; one being deleted is drained already.
	if !node.DeletionTimestamp.IsZero() || node.Labels[karpv1.NodeRegisteredLabelKey] != "true" ||
		node.Labels[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeReserved {
		return true, nil
	}
	storedNode := node.DeepCopy()
	demote(node.Labels)
	if err := c.kube.Patch(ctx, &node, client.MergeFrom(storedNode)); err != nil {
		return true, client.IgnoreNotFound(fmt.Errorf("relabelling Node %s as on-demand: %w", node.Name, err))
	}
	return true, nil
}

// demote sets labels' capacity type to on-demand and drops the
// reservation labels.
func demote(labels map[string]string) {
	labels[karpv1.CapacityTypeLabelKey] = karpv1.CapacityTypeOnDemand
	for _, k := range reservedLabels {
		delete(labels, k)
	}
}
