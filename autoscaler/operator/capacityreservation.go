package operator

import (
	"fmt"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/aws/controllers/capacityreservation/capacitytype"
	"github.com/karpx/karpx/autoscaler/aws/controllers/capacityreservation/expiration"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation"
)

// capacityReservations is implemented by cloud providers that resolve
// capacity reservations (the AWS one).
type capacityReservations interface {
	CapacityReservations() *capacityreservation.Provider
}

// registerCapacityBlockExpiration adds, with the ReservedCapacity feature
// gate on a cloud provider that resolves capacity reservations, the
// controllers of a reservation's end: capacityreservation.expiration
// drains the nodes of expiring Capacity Blocks and
// capacityreservation.capacitytype relabels the nodes of ended ODCRs as
// on-demand. Karpenter v1.14 registers both whatever the gate
// (aws/karpenter-provider-aws pkg/controllers/controllers.go@v1.14.3);
// without it no node is reserved, so karpx leaves them out.
func registerCapacityBlockExpiration(w *wiring) error {
	p, ok := w.cloud.(capacityReservations)
	if !w.opts.ReservedCapacity || !ok {
		return nil
	}
	exp := expiration.New(w.mgr.GetClient(), p.CapacityReservations(), w.recorder, w.clock(), expiration.Options{Logger: w.mgr.GetLogger()})
	informer, err := w.mgr.GetCache().GetInformer(w.ctx, &karpv1.NodeClaim{})
	if err != nil {
		return fmt.Errorf("registering capacity block expiration: NodeClaim informer: %w", err)
	}
	if _, err := informer.AddEventHandler(exp.Handler()); err != nil {
		return fmt.Errorf("registering capacity block expiration: %w", err)
	}
	if err := w.mgr.Add(exp); err != nil {
		return err
	}
	return w.mgr.Add(capacitytype.New(w.mgr.GetClient(), w.metered(capacitytype.Name), w.clock(),
		capacitytype.Options{Logger: w.mgr.GetLogger()}))
}
