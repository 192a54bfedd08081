package nodeoverlay

import (
	"context"
	"fmt"
	"sync/atomic"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// UnevaluatedNodePoolError reports that the NodeOverlays have not been
// evaluated against a NodePool yet (it is new, or its instance types could
// not be read), so its instance types cannot be given their overlaid
// prices; Karpenter's provisioner skips such a NodePool until they are
// (cloudprovider.UnevaluatedNodePoolError@v1.14.0).
type UnevaluatedNodePoolError struct{ NodePool string }

func (e *UnevaluatedNodePoolError) Error() string {
	return fmt.Sprintf("NodePool %q is awaiting NodeOverlay evaluation", e.NodePool)
}

// Store holds the last Evaluation; it is safe for concurrent use.
type Store struct{ ev atomic.Pointer[Evaluation] }

// NewStore returns a Store that has evaluated no NodePool yet.
func NewStore() *Store {
	s := &Store{}
	s.ev.Store(&Evaluation{Verdicts: map[string]Verdict{}, Pools: map[string]bool{}})
	return s
}

// Update replaces the evaluation.
func (s *Store) Update(ev *Evaluation) { s.ev.Store(ev) }

// Evaluation returns the current evaluation; callers must not change it.
func (s *Store) Evaluation() *Evaluation { return s.ev.Load() }

// Apply is Evaluation.Apply of the current evaluation, or
// *UnevaluatedNodePoolError when np was not part of it.
func (s *Store) Apply(np *karpv1.NodePool, its []*cloudprovider.InstanceType) ([]*cloudprovider.InstanceType, error) {
	ev := s.ev.Load()
	if !ev.Pools[np.Name] {
		return nil, &UnevaluatedNodePoolError{NodePool: np.Name}
	}
	return ev.Apply(np, its), nil
}

// ApplyToNodeClaim applies the current evaluation to the instance types a
// NodeClaim may launch as: its karpenter.sh/nodepool label names the
// NodePool and its labels stand for the template's (a NodeClaim carries
// them). It returns *UnevaluatedNodePoolError like Apply.
func (s *Store) ApplyToNodeClaim(nc *karpv1.NodeClaim, its []*cloudprovider.InstanceType) ([]*cloudprovider.InstanceType, error) {
	np := &karpv1.NodePool{}
	np.Name = nc.Labels[karpv1.NodePoolLabelKey]
	np.Spec.Template.Labels = nc.Labels
	return s.Apply(np, its)
}

// decorator applies the Store to the instance types of a cloud provider.
type decorator struct {
	cloudprovider.CloudProvider
	store *Store
}

// Decorate returns cloud with GetInstanceTypes returning the instance
// types after the NodeOverlays of store (Karpenter's
// pkg/cloudprovider/overlay decorator@v1.14.0); a NodePool not evaluated
// yet gets *UnevaluatedNodePoolError. Every other method is cloud's.
func Decorate(cloud cloudprovider.CloudProvider, store *Store) cloudprovider.CloudProvider {
	return &decorator{CloudProvider: cloud, store: store}
}

// GetInstanceTypes implements cloudprovider.CloudProvider.
func (d *decorator) GetInstanceTypes(ctx context.Context, np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	its, err := d.CloudProvider.GetInstanceTypes(ctx, np)
	if err != nil {
		return nil, err
	}
	return d.store.Apply(np, its)
}
