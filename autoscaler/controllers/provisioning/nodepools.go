package provisioning

import (
	"context"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/scheduling"
)

// NodePoolInputs returns what a pass (provisioning's, or disruption's
// simulation) may launch from: the scheduling input of every NodePool in
// pools that is not being deleted, that admit (when not nil) lets through,
// and whose instance types cloud returns, with its Remaining limits
// computed from claims (all the cluster's NodeClaims); and those instance
// types by NodePool name. A NodePool whose instance types cannot be read is
// left out and passed to failed (when not nil) with the error.
func NodePoolInputs(ctx context.Context, cloud cloudprovider.CloudProvider, pools []karpv1.NodePool, claims []karpv1.NodeClaim,
	admit func(*karpv1.NodePool) bool, failed func(*karpv1.NodePool, error)) ([]scheduling.NodePoolInput, map[string][]*cloudprovider.InstanceType) {
	var inputs []scheduling.NodePoolInput
	typesByPool := map[string][]*cloudprovider.InstanceType{}
	for i := range pools {
		np := &pools[i]
		if !np.DeletionTimestamp.IsZero() || (admit != nil && !admit(np)) {
			continue
		}
		its, err := cloud.GetInstanceTypes(ctx, np)
		if err != nil {
			if failed != nil {
				failed(np, err)
			}
			continue
		}
		typesByPool[np.Name] = its
		inputs = append(inputs, scheduling.NodePoolInput{NodePool: np, InstanceTypes: its, Remaining: Remaining(np, claims)})
	}
	return inputs, typesByPool
}
