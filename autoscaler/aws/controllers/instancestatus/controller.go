package instancestatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
	"github.com/karpx/karpx/autoscaler/aws/providers/instancestatus"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
)

// Interval is the time between polls: 1 minute, Karpenter v1.14's
// InstanceStatusInterval (pkg/controllers/interruption/instancestatus_controller.go).
const Interval = time.Minute

// Message kinds, Karpenter v1.14's messages.Kind values for the three
// categories (pkg/controllers/interruption/messages/types.go): the reason
// label of karpenter_nodeclaims_disrupted_total.
const (
	KindInstanceStatus = "instance_status"
	KindSystemStatus   = "system_status"
	KindEventStatus    = "event_status"
)

// Event reasons, Karpenter v1.14's (pkg/controllers/interruption/events/events.go).
const (
	ReasonInstanceUnhealthy         = "InstanceUnhealthy"
	ReasonTerminatingOnInterruption = "TerminatingOnInterruption"
)

// codeUnauthorized is EC2's error code for an action the IAM policy does
// not allow (EC2 API Reference, "Error codes for the Amazon EC2 API").
const codeUnauthorized = "UnauthorizedOperation"

// Lister lists the instances failing status checks
// (*instancestatus.Provider).
type Lister interface {
	// List returns every instance with a failed check or a scheduled
	// event, whatever its age.
	List(ctx context.Context) ([]instancestatus.HealthStatus, error)
}

// Options configure the Controller; every field may be zero.
type Options struct {
	// Interval is the time between polls. Default Interval.
	Interval time.Duration
	// Logger is used when Start's context carries none.
	Logger logr.Logger
}

// Controller polls EC2's instance status and deletes the NodeClaims of
// unhealthy instances (package doc). It implements manager.Runnable and
// runs only on the leader.
type Controller struct {
	kube     client.Client
	lister   Lister
	recorder record.EventRecorder
	clock    clock.WithTicker
	opts     Options

	mu     sync.Mutex
	seen   map[string]bool // instanceID/category counted in unhealthyTotal
	report instancestatus.Report
}

// New returns a Controller. kube is the manager's cached client; clk
// times the polls and the termination timestamps.
func New(kube client.Client, lister Lister, recorder record.EventRecorder, clk clock.WithTicker, opts Options) *Controller {
	if opts.Interval <= 0 {
		opts.Interval = Interval
	}
	return &Controller{kube: kube, lister: lister, recorder: recorder, clock: clk, opts: opts, seen: map[string]bool{}}
}

// NeedLeaderElection makes the Controller run only on the leader.
func (c *Controller) NeedLeaderElection() bool { return true }

// ErrUnauthorized is returned (wrapped) by Poll when EC2 refuses
// DescribeInstanceStatus to the controller's IAM role.
var ErrUnauthorized = errors.New("ec2:DescribeInstanceStatus is not allowed by the controller's IAM policy; add it (manifests/controller/iam-policy.json) and restart the controller to replace instances failing EC2 status checks")

// Start polls every Interval until ctx is done. A failed poll is logged
// and the next one waits the full Interval; ErrUnauthorized stops the
// polling (one error log), as in Karpenter.
func (c *Controller) Start(ctx context.Context) error {
	log, err := logr.FromContext(ctx)
	if err != nil {
		log = c.opts.Logger
	}
	log = log.WithName("instancestatus")
	ctx = logr.NewContext(ctx, log)
	log.Info("polling EC2 instance status", "interval", c.opts.Interval.String())
	for ctx.Err() == nil {
		if err := c.Poll(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, ErrUnauthorized) {
				log.Error(err, "instance status checks are off")
				return nil
			}
			log.Error(err, "polling EC2 instance status failed; nothing is changed in the cluster, polling again", "after", c.opts.Interval.String())
		}
		select {
		case <-ctx.Done():
		case <-c.clock.After(c.opts.Interval):
		}
	}
	return nil
}

// Poll lists the instances failing status checks once and acts on the
// NodeClaims whose instance is due (package doc). It returns the listing
// error (ErrUnauthorized wrapped for UnauthorizedOperation), with nothing
// changed, or the joined errors of the NodeClaims it could not act on.
func (c *Controller) Poll(ctx context.Context) error {
	// Speculative: never into the budget's reserve, and failing fast
	// rather than waiting behind launches and terminations; the next
	// poll tries again.
	statuses, err := c.lister.List(cloudprovider.WithPriority(ctx, cloudprovider.PrioritySpeculative))
	if err != nil {
		if ec2api.Code(err) == codeUnauthorized {
			err = fmt.Errorf("%w: %w", ErrUnauthorized, err)
		}
		c.mu.Lock()
		c.report.Polled, c.report.Error = c.clock.Now(), err.Error()
		c.mu.Unlock()
		return err
	}
	claims := map[string]*karpv1.NodeClaim{}
	if len(statuses) > 0 {
		var list karpv1.NodeClaimList
		if err := c.kube.List(ctx, &list); err != nil {
			return fmt.Errorf("listing NodeClaims: %w", err)
		}
		for i := range list.Items {
			if id := instance.InstanceID(list.Items[i].Status.ProviderID); id != "" {
				claims[id] = &list.Items[i]
			}
		}
	}
	now := c.clock.Now()
	report := instancestatus.Report{Polled: now, Instances: []instancestatus.ReportedInstance{}}
	current := map[string]bool{}
	var errs []error
	for _, h := range statuses {
		nc := claims[h.InstanceID]
		if nc == nil {
			continue // not this cluster's, or already gone
		}
		node := c.nodeOf(ctx, nc)
		row := instancestatus.ReportedInstance{HealthStatus: h, NodeClaim: nc.Name, NodePool: nc.Labels[karpv1.NodePoolLabelKey],
			DueAt: instancestatus.DueAt(h), Acted: !nc.DeletionTimestamp.IsZero()}
		if node != nil {
			row.Node = node.Name
		}
		if due, ok := instancestatus.Due(h, now); ok {
			c.countUnhealthy(ctx, due, current)
			acted, err := c.act(ctx, due, nc, node)
			row.Acted = row.Acted || acted
			if err != nil {
				errs = append(errs, err)
			}
		}
		report.Instances = append(report.Instances, row)
	}
	c.mu.Lock()
	for k := range c.seen {
		if !current[k] {
			delete(c.seen, k)
		}
	}
	c.report = report
	c.mu.Unlock()
	return errors.Join(errs...)
}

// countUnhealthy counts each category of due once while it stays
// unhealthy, recording it in current.
func (c *Controller) countUnhealthy(ctx context.Context, due instancestatus.HealthStatus, current map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cat := range due.Categories() {
		key := due.InstanceID + "/" + string(cat)
		current[key] = true
		if c.seen[key] {
			continue
		}
		c.seen[key] = true
		unhealthyTotal.WithLabelValues(string(cat)).Inc()
		logr.FromContextOrDiscard(ctx).Info("instance of a NodeClaim is failing EC2 status checks", "instance", due.InstanceID, "category", string(cat))
	}
}

// act deletes nc for due, forcefully when a status check failed. acted
// is true when nc is being deleted afterwards.
func (c *Controller) act(ctx context.Context, due instancestatus.HealthStatus, nc *karpv1.NodeClaim, node *corev1.Node) (acted bool, err error) {
	if !nc.DeletionTimestamp.IsZero() {
		return true, nil
	}
	kind, detail := kindOf(due)
	forceful := kind != KindEventStatus
	log := logr.FromContextOrDiscard(ctx).WithValues("NodeClaim", nc.Name, "NodePool", nc.Labels[karpv1.NodePoolLabelKey],
		"instance", due.InstanceID, "kind", kind, "check", detail.Name, "impairedSince", detail.ImpairedSince.UTC().Format(time.RFC3339))
	if node != nil {
		log = log.WithValues("Node", node.Name)
	}
	if !forceful && nc.Annotations[cloudprovider.InterruptionAnnotationKey] != "" {
		log.V(1).Info("scheduled event already handled by the interruption queue (replace first, then drain); nothing more to do")
		return false, nil
	}
	now := c.clock.Now()
	c.event(nc, node, ReasonInstanceUnhealthy, "EC2 reports instance %s unhealthy: %s %s since %s", due.InstanceID, detail.Category, detail.Name,
		detail.ImpairedSince.UTC().Format(time.RFC3339))
	if forceful {
		if _, ok := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; !ok {
			stored := nc.DeepCopy()
			metav1.SetMetaDataAnnotation(&nc.ObjectMeta, karpv1.NodeClaimTerminationTimestampAnnotationKey, now.UTC().Format(time.RFC3339))
			if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
				return false, client.IgnoreNotFound(fmt.Errorf("annotating NodeClaim %s with its termination timestamp: %w", nc.Name, err))
			}
		}
	}
	if err := c.kube.Delete(ctx, nc); err != nil {
		return false, client.IgnoreNotFound(fmt.Errorf("deleting NodeClaim %s of unhealthy instance %s: %w", nc.Name, due.InstanceID, err))
	}
	karpentermetrics.NodeClaimDisrupted(nc, kind)
	c.event(nc, node, ReasonTerminatingOnInterruption, "deleting the NodeClaim: instance %s fails EC2 %s (%s)", due.InstanceID, detail.Category,
		map[bool]string{true: "forceful drain", false: "graceful drain"}[forceful])
	log.Info("deleting the NodeClaim of an instance failing EC2 status checks", "forceful", forceful)
	return true, nil
}

// kinds maps a category to its message kind, in the order kindOf
// prefers them: a failed check before a scheduled event.
var kinds = []struct {
	category instancestatus.Category
	kind     string
}{
	{instancestatus.InstanceStatus, KindInstanceStatus},
	{instancestatus.SystemStatus, KindSystemStatus},
	{instancestatus.EventStatus, KindEventStatus},
}

// kindOf returns the message kind for due and the detail it is for.
func kindOf(due instancestatus.HealthStatus) (string, instancestatus.Detail) {
	for _, k := range kinds {
		for _, d := range due.Details {
			if d.Category == k.category {
				return k.kind, d
			}
		}
	}
	return KindEventStatus, due.Details[0]
}

func (c *Controller) event(nc *karpv1.NodeClaim, node *corev1.Node, reason, format string, args ...any) {
	c.recorder.Eventf(nc, corev1.EventTypeWarning, reason, format, args...)
	if node != nil {
		c.recorder.Eventf(node, corev1.EventTypeWarning, reason, format, args...)
	}
}

// nodeOf returns the NodeClaim's Node, or nil.
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

// Report returns the last poll (a copy).
func (c *Controller) Report() instancestatus.Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.report
	r.Instances = slices.Clone(r.Instances)
	return r
}

// Handler serves Report as JSON (GET only).
func (c *Controller) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c.Report())
	})
}
