package termination

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1 "github.com/karpx/karpx/apis/v1"
)

// Cleaner deletes what karpx created for a class; the AWS CloudProvider
// (autoscaler/aws/cloudprovider) implements it.
type Cleaner interface {
	// DeleteLaunchTemplates deletes the class's launch templates and
	// returns how many.
	DeleteLaunchTemplates(ctx context.Context, className string) (int, error)
	// DeleteInstanceProfile deletes the instance profile karpx created for
	// the class's spec.role and reports whether there was one.
	DeleteInstanceProfile(ctx context.Context, className string) (bool, error)
}

// WaitPeriod is how often a deleted class that NodeClaims still use is
// re-checked (NodeClaim deletions also wake it).
const WaitPeriod = 10 * time.Second

// Controller manages the EC2NodeClass finalizer. Create it with New.
type Controller struct {
	kube     client.Client
	cleaner  Cleaner
	recorder record.EventRecorder
}

// New returns the controller.
func New(kube client.Client, cleaner Cleaner, recorder record.EventRecorder) *Controller {
	return &Controller{kube: kube, cleaner: cleaner, recorder: recorder}
}

// Register adds the controller to mgr; NodeClaim deletions wake the class
// they referred to.
func (c *Controller) Register(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named("nodeclass.termination").
		For(&v1.EC2NodeClass{}).
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			nc := o.(*karpv1.NodeClaim)
			if nc.Spec.NodeClassRef == nil || nc.Spec.NodeClassRef.Kind != "EC2NodeClass" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: nc.Spec.NodeClassRef.Name}}}
		})).
		Complete(c)
}

// Reconcile adds the finalizer, or finalizes a deleted class.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("EC2NodeClass", req.Name)
	class := &v1.EC2NodeClass{}
	if err := c.kube.Get(ctx, req.NamespacedName, class); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if class.DeletionTimestamp.IsZero() {
		if controllerutil.ContainsFinalizer(class, v1.TerminationFinalizer) {
			return reconcile.Result{}, nil
		}
		stored := class.DeepCopy()
		controllerutil.AddFinalizer(class, v1.TerminationFinalizer)
		return reconcile.Result{}, client.IgnoreNotFound(c.kube.Patch(ctx, class, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})))
	}
	if !controllerutil.ContainsFinalizer(class, v1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	var claims karpv1.NodeClaimList
	if err := c.kube.List(ctx, &claims); err != nil {
		return reconcile.Result{}, err
	}
	var users []string
	for _, nc := range claims.Items {
		if ref := nc.Spec.NodeClassRef; ref != nil && ref.Kind == "EC2NodeClass" && ref.Name == class.Name {
			users = append(users, nc.Name)
		}
	}
	if len(users) > 0 {
		msg := fmt.Sprintf("waiting for %d NodeClaim(s) that use this EC2NodeClass to be deleted (%s) before deleting it", len(users), first(users))
		log.Info("deletion waits for NodeClaims", "nodeClaims", len(users))
		c.recorder.Event(class, corev1.EventTypeNormal, "WaitingOnNodeClaimTermination", msg)
		return reconcile.Result{RequeueAfter: WaitPeriod}, nil
	}
	n, err := c.cleaner.DeleteLaunchTemplates(ctx, class.Name)
	if err != nil {
		log.Info("deleting the class's launch templates failed; retrying", "transient", true, "error", err.Error())
		return reconcile.Result{RequeueAfter: WaitPeriod}, nil
	}
	// The instance profile goes after the launch templates that name it.
	deleted, err := c.cleaner.DeleteInstanceProfile(ctx, class.Name)
	if err != nil {
		log.Info("deleting the class's instance profile failed; retrying", "transient", true, "error", err.Error())
		return reconcile.Result{RequeueAfter: WaitPeriod}, nil
	}
	log.Info("deleted the class's launch templates and instance profile; releasing the EC2NodeClass", "launchTemplates", n, "instanceProfileDeleted", deleted)
	stored := class.DeepCopy()
	controllerutil.RemoveFinalizer(class, v1.TerminationFinalizer)
	return reconcile.Result{}, client.IgnoreNotFound(c.kube.Patch(ctx, class, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})))
}

func first(names []string) string {
	if len(names) > 3 {
		return fmt.Sprintf("%s, %s, %s, …", names[0], names[1], names[2])
	}
	return fmt.Sprint(names)
}
