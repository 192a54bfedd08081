package expiration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1 "github.com/karpx/karpx/apis/v1"
	awscloud "github.com/karpx/karpx/autoscaler/aws/cloudprovider"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// Name is the controller's name, Karpenter's
// (expiration/controller.go@v1.14.3 Name).
const Name = "capacityreservation.expiration"

// Interval is the longest time between polls: 1 minute, the RequeueAfter
// of Karpenter's expiration controller@v1.14.3.
const Interval = time.Minute

// ReasonTerminatingOnInterruption is the reason of the event published on
// a drained NodeClaim and its Node: Karpenter v1.14's interruption event
// reason (pkg/controllers/interruption/events/events.go), as a Capacity
// Block's end is handled as an interruption.
const ReasonTerminatingOnInterruption = "TerminatingOnInterruption"

// Lister describes capacity reservations
// (*capacityreservation.Provider).
type Lister interface {
	// List returns the active reservations that match any of terms,
	// without those whose end has passed.
	List(ctx context.Context, terms []v1.CapacityReservationSelectorTerm) ([]capacityreservation.Reservation, error)
}

// Options configure the Controller; every field may be zero.
type Options struct {
	// Interval is the longest time between polls. Default Interval.
	Interval time.Duration
	// Logger is used when Start's context carries none.
	Logger logr.Logger
}

// Controller deletes the NodeClaims of expiring Capacity Blocks (package
// doc). It implements manager.Runnable and runs only on the leader.
type Controller struct {
	kube     client.Client
	lister   Lister
	recorder record.EventRecorder
	clock    clock.WithTicker
	opts     Options
	// wake is signalled (Trigger) when a NodeClaim joins a reservation.
	wake chan struct{}
}

// New returns a Controller. kube is the manager's cached client; clk
// decides when a block is expiring and times the polls.
func New(kube client.Client, lister Lister, recorder record.EventRecorder, clk clock.WithTicker, opts Options) *Controller {
	if opts.Interval <= 0 {
		opts.Interval = Interval
	}
	return &Controller{kube: kube, lister: lister, recorder: recorder, clock: clk, opts: opts, wake: make(chan struct{}, 1)}
}

// Trigger asks for a poll now rather than at the next Interval; it never
// blocks.
func (c *Controller) Trigger() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Handler is the NodeClaim informer handler that calls Trigger when a
// NodeClaim gets the karpenter.k8s.aws/capacity-reservation-id label
// (created with it, or labelled at launch), so that the next poll learns
// its reservation's end and wakes at its 40-minute mark.
func (c *Controller) Handler() toolscache.ResourceEventHandler {
	has := func(obj any) bool {
		nc, ok := obj.(*karpv1.NodeClaim)
		return ok && nc.Labels[awscloud.LabelCapacityReservationID] != ""
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if has(obj) {
				c.Trigger()
			}
		},
		UpdateFunc: func(old, obj any) {
			if !has(old) && has(obj) {
				c.Trigger()
			}
		},
	}
}

// NeedLeaderElection makes the Controller run only on the leader.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start polls until ctx is done: every Interval, as soon as the next
// known Capacity Block starts expiring, and on Trigger. A failed poll is
// logged and retried after Interval.
func (c *Controller) Start(ctx context.Context) error {
	log, err := logr.FromContext(ctx)
	if err != nil {
		log = c.opts.Logger
	}
	log = log.WithName(Name)
	ctx = logr.NewContext(ctx, log)
	for ctx.Err() == nil {
		wait, err := c.Poll(ctx)
		if err != nil && ctx.Err() == nil {
			log.Error(err, "checking capacity blocks for expiry failed; polling again", "after", wait.String())
		}
		select {
		case <-ctx.Done():
		case <-c.clock.After(wait):
		case <-c.wake:
		}
	}
	return nil
}

// Poll deletes the NodeClaims whose Capacity Block is expiring now and
// returns how long to wait before the next poll: Interval, or less when a
// described block starts expiring sooner. Errors are the NodeClaim
// listing's, the description's (nothing deleted) or the joined errors of
// the deletions that failed.
func (c *Controller) Poll(ctx context.Context) (time.Duration, error) {
	var list karpv1.NodeClaimList
	if err := c.kube.List(ctx, &list, client.HasLabels{awscloud.LabelCapacityReservationID}); err != nil {
		return c.opts.Interval, fmt.Errorf("listing NodeClaims: %w", err)
	}
	var ids []string
	for i := range list.Items {
		if id := list.Items[i].Labels[awscloud.LabelCapacityReservationID]; !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return c.opts.Interval, nil
	}
	slices.Sort(ids)
	terms := make([]v1.CapacityReservationSelectorTerm, len(ids))
	for i, id := range ids {
		terms[i] = v1.CapacityReservationSelectorTerm{ID: id}
	}
	// Speculative: never into the budget's reserve; the next poll tries
	// again.
	rs, err := c.lister.List(cloudprovider.WithPriority(ctx, cloudprovider.PrioritySpeculative), terms)
	if err != nil {
		return c.opts.Interval, fmt.Errorf("describing the capacity reservations of %d NodeClaims: %w", len(list.Items), err)
	}
	now := c.clock.Now()
	wait := c.opts.Interval
	expiring := map[string]capacityreservation.Reservation{}
	for _, r := range rs {
		if capacityreservation.Expiring(r.Type, r.End, now) {
			expiring[r.ID] = r
		} else if r.Type == capacityreservation.TypeCapacityBlock && !r.End.IsZero() {
			wait = min(wait, r.End.Add(-capacityreservation.ExpiringWindow).Sub(now))
		}
	}
	var errs []error
	for i := range list.Items {
		nc := &list.Items[i]
		r, ok := expiring[nc.Labels[awscloud.LabelCapacityReservationID]]
		if !ok || !nc.DeletionTimestamp.IsZero() {
			continue
		}
		if err := c.drain(ctx, nc, r); err != nil {
			errs = append(errs, err)
		}
	}
	return wait, errors.Join(errs...)
}

// drain deletes nc, whose Capacity Block r is expiring, publishing the
// event and the log line of the package doc.
func (c *Controller) drain(ctx context.Context, nc *karpv1.NodeClaim, r capacityreservation.Reservation) error {
	if err := c.kube.Delete(ctx, nc); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("deleting NodeClaim %s of expiring capacity block %s: %w", nc.Name, r.ID, err))
	}
	end := r.End.UTC().Format(time.RFC3339)
	msg := fmt.Sprintf("capacity block %s ends at %s and is expiring (%s before its end; EC2 terminates its instances 10 minutes later): draining and deleting the NodeClaim",
		r.ID, end, capacityreservation.ExpiringWindow)
	c.recorder.Event(nc, corev1.EventTypeWarning, ReasonTerminatingOnInterruption, msg)
	log := logr.FromContextOrDiscard(ctx).WithValues("NodeClaim", nc.Name, "NodePool", nc.Labels[karpv1.NodePoolLabelKey],
		"capacity-reservation-id", r.ID, "end", end)
	if nc.Status.NodeName != "" {
		var node corev1.Node
		if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, &node); err == nil {
			c.recorder.Event(&node, corev1.EventTypeWarning, ReasonTerminatingOnInterruption, msg)
		}
		log = log.WithValues("Node", nc.Status.NodeName)
	}
	log.Info("initiating delete for capacity block expiration")
	return nil
}
