package interruption

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/golang-lru/v2/expirable"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/aws/controllers/interruption/messages"
	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
	"github.com/karpx/karpx/autoscaler/aws/providers/sqs"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/state/timeouts"
)

// InstanceIDField is the cache index of NodeClaims by the EC2 instance ID
// at the end of status.providerID ("aws:///us-east-1a/i-0abc…" →
// "i-0abc…"), registered by IndexFields.
const InstanceIDField = "karpx.io/instance-id"

// Queue is the interruption queue as the Controller uses it
// (*sqs.Provider).
type Queue interface {
	// Name is the queue's name, for logs.
	Name() string
	// Receive long-polls for messages.
	Receive(ctx context.Context) ([]sqs.Message, error)
	// Delete deletes a handled message.
	Delete(ctx context.Context, m sqs.Message) error
	// OwnerAccount is the 12-digit account id that owns the queue (from
	// its URL): every message's account must be it.
	OwnerAccount(ctx context.Context) (string, error)
}

// Offerings is the unavailable-offerings cache
// (*instancetype.UnavailableOfferings).
type Offerings interface {
	// MarkUnavailable keeps the offering out of launches for a while.
	MarkUnavailable(instanceType, zone, capacityType string)
}

// Options configure the Controller; every field may be zero.
type Options struct {
	// SpotNotice is how long after a spot interruption warning's time EC2
	// reclaims the instance. Default messages.SpotNotice (2 min, EC2's);
	// tests with a simulator use its shortened window.
	SpotNotice time.Duration
	// ActOnRebalance treats a rebalance recommendation as an interruption
	// (flag --interruption-act-on-rebalance). Default false: an event and
	// a metric only, as Karpenter.
	ActOnRebalance bool
	// MinBackoff and MaxBackoff bound the wait after a failed
	// ReceiveMessage (doubling from min to max). Defaults 1 s and 1 min.
	MinBackoff, MaxBackoff time.Duration
	// Region is the controller's AWS region (--region): every message's
	// region must be it. Empty rejects every message (reason
	// region_mismatch): the operator always sets it.
	Region string
	// Logger is used when Start's context carries none.
	Logger logr.Logger
}

func (o *Options) defaults() {
	timeouts.Default(&o.SpotNotice, messages.SpotNotice)
	timeouts.Default(&o.MinBackoff, time.Second)
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = time.Minute
	}
}

// actedTTL is how long the in-memory record of an instance acted on is
// kept: longer than any notice window, after which the NodeClaim's mark
// (or its absence once deleted) answers.
const actedTTL = time.Hour

// Controller polls the interruption queue and acts on its messages. It
// implements manager.Runnable and runs only on the leader.
type Controller struct {
	kube      client.Client
	queue     Queue
	offerings Offerings
	recorder  record.EventRecorder
	clock     clock.WithTicker
	trigger   func()
	opts      Options
	acted     *expirable.LRU[string, struct{}]
}

// New returns a Controller. kube is the manager's cached client (with
// InstanceIDField indexed); trigger asks the disruption controller for a
// pass (disruption.Controller.Trigger).
func New(kube client.Client, queue Queue, offerings Offerings, recorder record.EventRecorder, clk clock.WithTicker, trigger func(), opts Options) *Controller {
	opts.defaults()
	return &Controller{kube: kube, queue: queue, offerings: offerings, recorder: recorder, clock: clk, trigger: trigger, opts: opts,
		acted: expirable.NewLRU[string, struct{}](100000, nil, actedTTL)}
}

// IndexFields registers InstanceIDField with mgr's cache.
func IndexFields(ctx context.Context, mgr manager.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &karpv1.NodeClaim{}, InstanceIDField, instanceIDIndex)
}

func instanceIDIndex(o client.Object) []string {
	if id := instance.InstanceID(o.(*karpv1.NodeClaim).Status.ProviderID); id != "" {
		return []string{id}
	}
	return nil
}

// NeedLeaderElection makes the Controller run only on the leader.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start polls until ctx is done. A failed receive is logged and counted,
// and the next one waits (exponential backoff); nothing else happens.
func (c *Controller) Start(ctx context.Context) error {
	log, err := logr.FromContext(ctx)
	if err != nil {
		log = c.opts.Logger
	}
	log = log.WithName("interruption").WithValues("queue", c.queue.Name())
	ctx = logr.NewContext(ctx, log)
	log.Info("watching the interruption queue")
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		if err := c.Poll(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			backoff = min(max(2*backoff, c.opts.MinBackoff), c.opts.MaxBackoff)
			log.Error(err, "receiving from the interruption queue failed; nothing is changed in the cluster, retrying", "after", backoff.String())
			select {
			case <-ctx.Done():
			case <-c.clock.After(backoff):
			}
			continue
		}
		backoff = 0
	}
	return nil
}

// Poll receives one batch of messages (one long poll) and handles them. It
// returns the receive error; handling errors are logged and leave their
// messages on the queue.
func (c *Controller) Poll(ctx context.Context) error {
	msgs, err := c.queue.Receive(ctx)
	if err != nil {
		queueErrors.WithLabelValues("receive").Inc()
		return err
	}
	c.Handle(ctx, msgs)
	return nil
}

// Handle acts on msgs and deletes every one handled (acted on, nothing to
// do, malformed); a message whose action failed stays on the queue. The
// disruption controller is triggered once when any NodeClaim was marked.
func (c *Controller) Handle(ctx context.Context, msgs []sqs.Message) {
	log := logr.FromContextOrDiscard(ctx)
	if len(msgs) == 0 {
		return
	}
	account, err := c.queue.OwnerAccount(ctx)
	if err != nil {
		// Nothing can be checked: act on nothing, delete nothing (the
		// messages come back after their visibility timeout).
		log.Error(err, "the interruption queue's owner account is unknown; leaving the messages on the queue", "messages", len(msgs))
		return
	}
	origin := messages.Origin{Account: account, Region: c.opts.Region}
	marked := false
	for _, raw := range msgs {
		m, err := messages.Parse([]byte(raw.Body))
		if err != nil {
			receivedMessages.WithLabelValues(MessageTypeMalformed).Inc()
			// The error never quotes the body; the id finds it in SQS.
			log.Info("deleting a malformed interruption message", "messageID", raw.ID, "error", err.Error())
			c.delete(ctx, raw)
			continue
		}
		if err := origin.Check(m); err != nil {
			var rej *messages.RejectedError
			errors.As(err, &rej)
			receivedMessages.WithLabelValues(MessageTypeRejected).Inc()
			rejectedMessages.WithLabelValues(rej.Reason).Inc()
			// Deleted so that it is not delivered again and again; acted
			// on never. Only the id, the field and what it had to be are
			// logged: the body is the sender's.
			log.Info("deleting an interruption message from another account or region; nothing is done for it",
				"messageID", raw.ID, "field", rej.Field, "want", rej.Want, "kind", string(m.Kind), "instances", m.InstanceIDs)
			c.delete(ctx, raw)
			continue
		}
		receivedMessages.WithLabelValues(string(m.Kind)).Inc()
		sent := raw.SentAt
		if sent.IsZero() {
			sent = m.Time
		}
		messageQueueDuration.Observe(max(c.clock.Since(sent).Seconds(), 0))
		did, err := c.act(ctx, m)
		marked = marked || did
		if err != nil {
			log.Error(err, "acting on an interruption message failed; it stays on the queue and comes back after its visibility timeout",
				"messageID", raw.ID, "kind", string(m.Kind), "instances", m.InstanceIDs)
			continue
		}
		c.delete(ctx, raw)
	}
	if marked && c.trigger != nil {
		c.trigger()
	}
}

func (c *Controller) delete(ctx context.Context, raw sqs.Message) {
	if err := c.queue.Delete(ctx, raw); err != nil {
		queueErrors.WithLabelValues("delete").Inc()
		// It comes back after the visibility timeout and is handled
		// again, as a duplicate.
		logr.FromContextOrDiscard(ctx).Error(err, "deleting an interruption message failed", "messageID", raw.ID)
		return
	}
	deletedMessages.Inc()
}

// act applies m to the NodeClaim of each of its instances. marked is true
// when a NodeClaim was newly marked interrupted.
func (c *Controller) act(ctx context.Context, m messages.Message) (marked bool, err error) {
	if m.Kind == messages.KindNoOp {
		return false, nil
	}
	var errs []error
	for _, id := range m.InstanceIDs {
		nc, err := c.nodeClaimFor(ctx, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if nc == nil {
			// Not a karpx instance, or already gone.
			logr.FromContextOrDiscard(ctx).V(1).Info("no NodeClaim for the instance of an interruption message", "instance", id, "kind", string(m.Kind))
			continue
		}
		did, err := c.actOn(ctx, m, id, nc)
		marked = marked || did
		if err != nil {
			errs = append(errs, err)
		}
	}
	return marked, errors.Join(errs...)
}

func (c *Controller) actOn(ctx context.Context, m messages.Message, id string, nc *karpv1.NodeClaim) (bool, error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("NodeClaim", nc.Name, "NodePool", nc.Labels[karpv1.NodePoolLabelKey], "instance", id, "kind", string(m.Kind))
	node := c.nodeOf(ctx, nc)
	if node != nil {
		log = log.WithValues("Node", node.Name)
	}
	switch {
	case m.Kind == messages.KindRebalanceRecommendation && !c.opts.ActOnRebalance:
		if c.once(id, "rebalance") {
			c.event(nc, node, corev1.EventTypeNormal, "SpotRebalanceRecommendation",
				"EC2 recommends rebalancing spot instance %s: it is at elevated risk of interruption (no action: --interruption-act-on-rebalance is off)", id)
			log.Info("spot rebalance recommendation")
		}
		return false, nil
	case m.Kind == messages.KindTerminating && m.State == "terminated":
		return false, c.cleanUp(ctx, log, id, nc, node)
	}
	if m.Kind == messages.KindSpotInterruption {
		// As Karpenter: the pool EC2 takes spot capacity back from is
		// not launched into again for a while.
		if it, zone := nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone]; it != "" && zone != "" {
			c.offerings.MarkUnavailable(it, zone, karpv1.CapacityTypeSpot)
		}
	}
	if !nc.DeletionTimestamp.IsZero() || nc.Annotations[cloudprovider.InterruptionAnnotationKey] != "" || !c.once(id, "act") {
		log.V(1).Info("interruption already being handled; nothing more to do")
		return false, nil
	}
	now := c.clock.Now()
	reclaim, ok := m.ReclaimAt(c.opts.SpotNotice, now)
	if !ok { // a rebalance recommendation acted on: as if it were a warning
		reclaim = m.Time.Add(c.opts.SpotNotice)
	}
	drainBy := now
	if reclaim.After(now) {
		drainBy = now.Add(reclaim.Sub(now) / 2)
	}
	stored := nc.DeepCopy()
	metav1.SetMetaDataAnnotation(&nc.ObjectMeta, cloudprovider.InterruptionAnnotationKey, string(m.Kind))
	metav1.SetMetaDataAnnotation(&nc.ObjectMeta, cloudprovider.InterruptionReclaimAtAnnotationKey, reclaim.UTC().Format(time.RFC3339))
	metav1.SetMetaDataAnnotation(&nc.ObjectMeta, cloudprovider.InterruptionDrainByAnnotationKey, drainBy.UTC().Format(time.RFC3339))
	if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		c.acted.Remove(id + "/act")
		return false, client.IgnoreNotFound(fmt.Errorf("marking NodeClaim %s interrupted: %w", nc.Name, err))
	}
	reason, what := eventFor(m)
	c.event(nc, node, corev1.EventTypeWarning, reason, "%s: EC2 reclaims instance %s at %s (in %ds); replacing first, draining by %s",
		what, id, reclaim.UTC().Format(time.RFC3339), int(reclaim.Sub(now).Seconds()), drainBy.UTC().Format(time.RFC3339))
	log.Info("interruption: replacing the node first, then draining it", "reclaimAt", reclaim.UTC().Format(time.RFC3339),
		"drainBy", drainBy.UTC().Format(time.RFC3339))
	return true, nil
}

// cleanUp deletes the NodeClaim and Node of a terminated instance at once.
func (c *Controller) cleanUp(ctx context.Context, log logr.Logger, id string, nc *karpv1.NodeClaim, node *corev1.Node) error {
	first := c.once(id, "terminated")
	if first {
		c.event(nc, node, corev1.EventTypeWarning, "InstanceTerminating", "EC2 instance %s is terminated; deleting its NodeClaim and Node", id)
		log.Info("instance terminated; deleting its NodeClaim and Node now")
	}
	var errs []error
	if nc.DeletionTimestamp.IsZero() {
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting NodeClaim %s of terminated instance %s: %w", nc.Name, id, err))
		} else if err == nil {
			karpentermetrics.NodeClaimDisrupted(nc, string(messages.KindTerminating))
		}
	}
	if node != nil && node.DeletionTimestamp.IsZero() {
		if err := c.kube.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting Node %s of terminated instance %s: %w", node.Name, id, err))
		}
	}
	if len(errs) > 0 && first {
		c.acted.Remove(id + "/terminated")
	}
	return errors.Join(errs...)
}

// once reports whether (id, what) is seen for the first time, and records it.
func (c *Controller) once(id, what string) bool {
	key := id + "/" + what
	if c.acted.Contains(key) {
		return false
	}
	c.acted.Add(key, struct{}{})
	return true
}

// eventFor returns the event reason (Karpenter's) and a description of m.
func eventFor(m messages.Message) (reason, what string) {
	switch m.Kind {
	case messages.KindSpotInterruption:
		return "SpotInterrupted", "EC2 spot interruption warning (instance-action " + m.Action + ")"
	case messages.KindScheduledChange:
		return "InstanceUnhealthy", "AWS Health scheduled change " + m.EventTypeCode
	case messages.KindStopping:
		return "InstanceStopping", "EC2 instance state " + m.State
	case messages.KindTerminating:
		return "InstanceTerminating", "EC2 instance state " + m.State
	}
	return "SpotRebalanceRecommendation", "EC2 rebalance recommendation (acted on: --interruption-act-on-rebalance)"
}

func (c *Controller) event(nc *karpv1.NodeClaim, node *corev1.Node, typ, reason, format string, args ...any) {
	c.recorder.Eventf(nc, typ, reason, format, args...)
	if node != nil {
		c.recorder.Eventf(node, typ, reason, format, args...)
	}
}

// nodeClaimFor returns the NodeClaim of the instance, or nil.
func (c *Controller) nodeClaimFor(ctx context.Context, id string) (*karpv1.NodeClaim, error) {
	var list karpv1.NodeClaimList
	if err := c.kube.List(ctx, &list, client.MatchingFields{InstanceIDField: id}); err != nil {
		return nil, fmt.Errorf("listing NodeClaims of instance %s: %w", id, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}

// nodeOf returns the NodeClaim's Node, or nil (not registered, not found,
// or not readable: events then go to the NodeClaim only).
func (c *Controller) nodeOf(ctx context.Context, nc *karpv1.NodeClaim) *corev1.Node {
	if nc.Status.NodeName == "" {
		return nil
	}
	var node corev1.Node
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, &node); err != nil {
		return nil
	}
	return &node
}
