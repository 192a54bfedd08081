package cloudprovider

import (
	"context"
	"fmt"

	"github.com/mitchellh/hashstructure/v2"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1 "github.com/karpx/karpx/apis/v1"
)

// NodeClassHashAnnotationKey records on a NodeClaim the hash of its
// EC2NodeClass's launch-relevant fields at launch (the key Karpenter's AWS
// provider uses), so a later change is seen as drift.
const NodeClassHashAnnotationKey = "karpenter.k8s.aws/ec2nodeclass-hash"

// Drift reasons IsDrifted returns, as Karpenter's AWS provider names them.
const (
	DriftReasonAMI       = "AMIDrifted"
	DriftReasonNodeClass = "NodeClassDrifted"
)

// nodeClassHash hashes the EC2NodeClass fields that shape a launch other
// than the selector terms (which are checked against what they resolve to):
// userData, kubelet, block devices, metadata options, tags, role, instance
// profile, AMI family and the like.
func nodeClassHash(class *v1.EC2NodeClass) string {
	spec := class.Spec.DeepCopy()
	spec.SubnetSelectorTerms = nil
	spec.SecurityGroupSelectorTerms = nil
	spec.AMISelectorTerms = nil
	h, err := hashstructure.Hash(spec, hashstructure.FormatV2, &hashstructure.HashOptions{SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true})
	if err != nil {
		return ""
	}
	return fmt.Sprint(h)
}

// IsDrifted implements cloudprovider.CloudProvider. It reads the
// EC2NodeClass and resolves only its AMIs (cached): drift needs neither
// the instance types nor the network, and resolving the whole class for
// each NodeClaim allocated about 20 MB per NodeClaim and pass (issue 12's
// controller-memory measurement).
func (c *CloudProvider) IsDrifted(ctx context.Context, nodeClaim *karpv1.NodeClaim) (string, error) {
	if nodeClaim.Spec.NodeClassRef == nil || nodeClaim.Spec.NodeClassRef.Name == "" {
		return "", nil
	}
	name := nodeClaim.Spec.NodeClassRef.Name
	class, err := c.getNodeClass(ctx, name)
	if err != nil {
		return "", fmt.Errorf("NodeClaim %q: %w", nodeClaim.Name, err)
	}
	if h := nodeClaim.Annotations[NodeClassHashAnnotationKey]; h != "" && h != nodeClassHash(class) {
		return DriftReasonNodeClass, nil
	}
	if id := nodeClaim.Status.ImageID; id != "" {
		amis, err := c.amis.List(ctx, class.Spec.AMISelectorTerms)
		if err != nil {
			return "", fmt.Errorf("NodeClaim %q: EC2NodeClass %q: resolving spec.amiSelectorTerms: %w", nodeClaim.Name, name, err)
		}
		if len(amis) == 0 {
			// No answer to compare with: not drift (nothing is replaced
			// because a selector matched nothing).
			return "", fmt.Errorf("NodeClaim %q: EC2NodeClass %q: spec.amiSelectorTerms matched no AMI", nodeClaim.Name, name)
		}
		for _, a := range amis {
			if a.ID == id {
				return "", nil
			}
		}
		return DriftReasonAMI, nil
	}
	return "", nil
}
