package karpentermetrics

import (
	"context"
	"errors"
	"time"

	"k8s.io/utils/clock"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// Well-known values of LabelError, as Karpenter v1.13.0 names them
// (pkg/cloudprovider/metrics/cloudprovider.go).
const (
	ErrorInsufficientCapacity = "InsufficientCapacityError"
	ErrorNodeClaimNotFound    = "NodeClaimNotFoundError"
	ErrorNodeClassNotReady    = "NodeClassNotReadyError"
)

// Decorate returns cloud with every call timed into
// karpenter_cloudprovider_duration_seconds and every error counted in
// karpenter_cloudprovider_errors_total, labelled controller (the caller,
// one of the Controller* names), the method name and provider (for example
// "aws"). GetInstanceTypes' answers also set the instance type families
// (karpenter_cloudprovider_instance_type_*, recordInstanceTypes). The
// result implements only cloudprovider.CloudProvider: type
// assertions for optional interfaces must be made on cloud itself. Calls
// are timed on the wall clock; DecorateWithClock takes another.
func Decorate(cloud cloudprovider.CloudProvider, controller, provider string) cloudprovider.CloudProvider {
	return DecorateWithClock(cloud, controller, provider, clock.RealClock{})
}

// DecorateWithClock is Decorate with each call's duration (seconds) read
// from clk.
func DecorateWithClock(cloud cloudprovider.CloudProvider, controller, provider string, clk clock.PassiveClock) cloudprovider.CloudProvider {
	return &decorator{cloud: cloud, controller: controller, provider: provider, clk: clk}
}

type decorator struct {
	cloud                cloudprovider.CloudProvider
	controller, provider string
	clk                  clock.PassiveClock
}

// ErrorLabel returns the LabelError value of err: the name of the
// well-known CloudProvider error type it wraps, or "".
func ErrorLabel(err error) string {
	var ice *cloudprovider.InsufficientCapacityError
	var nf *cloudprovider.NodeClaimNotFoundError
	var nr *cloudprovider.NodeClassNotReadyError
	switch {
	case errors.As(err, &ice):
		return ErrorInsufficientCapacity
	case errors.As(err, &nf):
		return ErrorNodeClaimNotFound
	case errors.As(err, &nr):
		return ErrorNodeClassNotReady
	}
	return ""
}

func (d *decorator) observe(method string, start time.Time, err error) {
	CloudProviderDurationSeconds.WithLabelValues(d.controller, method, d.provider).Observe(d.clk.Since(start).Seconds())
	if err != nil {
		CloudProviderErrorsTotal.WithLabelValues(d.controller, method, d.provider, ErrorLabel(err)).Inc()
	}
}

func (d *decorator) Create(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	start := d.clk.Now()
	out, err := d.cloud.Create(ctx, nc)
	d.observe("Create", start, err)
	return out, err
}

func (d *decorator) Delete(ctx context.Context, nc *karpv1.NodeClaim) error {
	start := d.clk.Now()
	err := d.cloud.Delete(ctx, nc)
	d.observe("Delete", start, err)
	return err
}

func (d *decorator) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	start := d.clk.Now()
	out, err := d.cloud.Get(ctx, providerID)
	d.observe("Get", start, err)
	return out, err
}

func (d *decorator) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	start := d.clk.Now()
	out, err := d.cloud.List(ctx)
	d.observe("List", start, err)
	return out, err
}

func (d *decorator) GetInstanceTypes(ctx context.Context, np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	start := d.clk.Now()
	out, err := d.cloud.GetInstanceTypes(ctx, np)
	d.observe("GetInstanceTypes", start, err)
	if err == nil && np != nil {
		recordInstanceTypes(np.Name, out, d.clk.Now())
	}
	return out, err
}

func (d *decorator) IsDrifted(ctx context.Context, nc *karpv1.NodeClaim) (string, error) {
	start := d.clk.Now()
	out, err := d.cloud.IsDrifted(ctx, nc)
	d.observe("IsDrifted", start, err)
	return out, err
}
