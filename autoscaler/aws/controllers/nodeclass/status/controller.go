package status

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	awscloud "github.com/karpx/karpx/autoscaler/aws/cloudprovider"
	"github.com/karpx/karpx/autoscaler/state/timeouts"
)

// Resolver resolves an EC2NodeClass into its status; *awscloud.CloudProvider
// implements it. Errors are transient AWS failures.
type Resolver interface {
	ResolveNodeClass(ctx context.Context, class *v1.EC2NodeClass) (*awscloud.NodeClassStatus, error)
}

// Options configure the controller.
type Options struct {
	// ResyncPeriod re-resolves every class this often, so that re-tagged
	// subnets or a new AMI release show up without an edit. Default
	// cache.DefaultTTL (1m): a resolution older than that is re-described.
	ResyncPeriod time.Duration
	// RetryBase and RetryMax bound the backoff after transient failures
	// (doubling per consecutive failure). Defaults 1s and 1m.
	RetryBase, RetryMax time.Duration
}

// Reasons of the conditions this controller sets besides a Check's own.
const (
	// ReasonResolving is the reason of conditions not yet known because
	// the first resolution is pending or failed transiently.
	ReasonResolving = "Resolving"
	// ReasonNotReady is Ready's reason when a dependent condition is False.
	ReasonNotReady = "NotReady"
	// EventNodeClassNotReady is the Warning event reason when Ready turns False.
	EventNodeClassNotReady = "NodeClassNotReady"
)

// Controller writes EC2NodeClass status. Create it with New.
type Controller struct {
	kube     client.Client
	resolver Resolver
	recorder record.EventRecorder
	opts     Options

	mu       sync.Mutex
	failures map[string]int
}

// New returns a controller resolving through resolver and recording events
// with recorder.
func New(kube client.Client, resolver Resolver, recorder record.EventRecorder, opts Options) *Controller {
	timeouts.Default(&opts.ResyncPeriod, cache.DefaultTTL)
	timeouts.Default(&opts.RetryBase, time.Second)
	if opts.RetryMax < opts.RetryBase {
		opts.RetryMax = time.Minute
	}
	return &Controller{kube: kube, resolver: resolver, recorder: recorder, opts: opts, failures: map[string]int{}}
}

// Register adds the controller to mgr; like every controller-runtime
// controller it runs on the leader only.
func (c *Controller) Register(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named("nodeclass.status").For(&v1.EC2NodeClass{}).Complete(c)
}

// Reconcile resolves one EC2NodeClass and patches its status.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("EC2NodeClass", req.Name)
	class := &v1.EC2NodeClass{}
	if err := c.kube.Get(ctx, req.NamespacedName, class); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !class.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	stored := class.DeepCopy()
	res, err := c.resolver.ResolveNodeClass(ctx, class)
	if err != nil {
		wait := c.backoff(req.Name)
		log.Info("resolving EC2NodeClass failed; keeping the last status and retrying", "transient", true, "retryIn", wait.String(), "error", err.Error())
		for _, t := range append([]string{v1.ConditionTypeReady}, v1.ConditionTypes...) {
			if meta.FindStatusCondition(class.Status.Conditions, t) == nil {
				meta.SetStatusCondition(&class.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionUnknown,
					Reason: ReasonResolving, Message: truncate("waiting for AWS (will retry): " + err.Error()), ObservedGeneration: class.Generation})
			}
		}
		if perr := c.patch(ctx, stored, class); perr != nil {
			return reconcile.Result{}, perr
		}
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	c.mu.Lock()
	delete(c.failures, req.Name)
	c.mu.Unlock()
	Apply(class, res)
	wasReady := meta.FindStatusCondition(stored.Status.Conditions, v1.ConditionTypeReady)
	ready := meta.FindStatusCondition(class.Status.Conditions, v1.ConditionTypeReady)
	if ready.Status == metav1.ConditionFalse && (wasReady == nil || wasReady.Status != metav1.ConditionFalse || wasReady.Message != ready.Message) {
		log.Info("EC2NodeClass not ready", "reason", ready.Reason, "message", ready.Message)
		c.recorder.Event(class, corev1.EventTypeWarning, EventNodeClassNotReady, ready.Message)
	}
	if err := c.patch(ctx, stored, class); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: c.opts.ResyncPeriod}, nil
}

func (c *Controller) patch(ctx context.Context, stored, class *v1.EC2NodeClass) error {
	if equality.Semantic.DeepEqual(stored.Status, class.Status) {
		return nil
	}
	return client.IgnoreNotFound(c.kube.Status().Patch(ctx, class, client.MergeFrom(stored)))
}

func (c *Controller) backoff(name string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures[name]++
	d := c.opts.RetryBase
	for i := 1; i < c.failures[name] && d < c.opts.RetryMax; i++ {
		d *= 2
	}
	return min(d, c.opts.RetryMax)
}

// Apply writes res into class.Status: the resolved resources and one
// condition per check, then Ready (True when every check passed, else False
// with reason NotReady and the failed checks' messages).
func Apply(class *v1.EC2NodeClass, res *awscloud.NodeClassStatus) {
	class.Status.Subnets = res.Subnets
	class.Status.SecurityGroups = res.SecurityGroups
	class.Status.AMIs = res.AMIs
	class.Status.InstanceProfile = res.InstanceProfile
	class.Status.CapacityReservations = res.CapacityReservations
	var failed []string
	for _, ch := range res.Checks {
		cond := metav1.Condition{Type: ch.Type, Status: metav1.ConditionTrue, Reason: ch.Type, Message: truncate(ch.Message), ObservedGeneration: class.Generation}
		if ch.Reason != "" {
			cond.Reason = ch.Reason
		}
		if !ch.OK {
			cond.Status = metav1.ConditionFalse
			failed = append(failed, fmt.Sprintf("%s=False: %s", ch.Type, ch.Message))
		}
		meta.SetStatusCondition(&class.Status.Conditions, cond)
	}
	ready := metav1.Condition{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeReady, ObservedGeneration: class.Generation}
	if len(failed) > 0 {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, ReasonNotReady, truncate(strings.Join(failed, "; "))
	}
	meta.SetStatusCondition(&class.Status.Conditions, ready)
}

// truncate keeps a condition message within the API's 32768-byte limit
// with room to spare.
func truncate(s string) string {
	const limit = 4096
	if len(s) <= limit {
		return s
	}
	return s[:limit-3] + "..."
}
