package cloudprovider

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/capacity"
	"github.com/karpx/karpx/autoscaler/aws/providers/ami"
	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/catalog"
)

// Capacity returns the learned-capacity cache.
func (c *CloudProvider) Capacity() *capacity.Cache { return c.capacity }

// allocatable is what pods can request on a node of it booted from
// imageID for class: the observed allocatable of (type, AMI) once a Node
// registered, else capacity.Estimate under the class's spec.kubelet.
func (c *CloudProvider) allocatable(it *cloudprovider.InstanceType, imageID string, class *v1.EC2NodeClass) corev1.ResourceList {
	vcpus, _ := strconv.ParseInt(it.Labels[catalog.LabelInstanceCPU], 10, 64)
	est := capacity.Estimate(it.Allocatable, vcpus, class.Spec.Kubelet)
	return c.capacity.Allocatable(capacity.Key{InstanceType: it.Name, AMIID: imageID}, est)
}

// ObserveNode records a registered Node's status.allocatable under its
// (instance type, AMI) key. Both come from the Node's own labels: the
// instance type from node.kubernetes.io/instance-type and the AMI by
// matching the Node's labels (architecture, GPU and accelerator counts)
// against the AMIs its EC2NodeClass (karpenter.k8s.aws/ec2nodeclass label)
// resolves, as launches choose it. ok is false for Nodes karpx did not
// launch or whose class no longer resolves an AMI for them; errors are
// transient AWS or API failures.
func (c *CloudProvider) ObserveNode(ctx context.Context, node *corev1.Node) (capacity.Key, bool, error) {
	typ, className := node.Labels[corev1.LabelInstanceTypeStable], node.Labels[instance.TagNodeClass]
	if typ == "" || className == "" || len(node.Status.Allocatable) == 0 {
		return capacity.Key{}, false, nil
	}
	class := &v1.EC2NodeClass{}
	if err := c.opts.KubeClient.Get(ctx, client.ObjectKey{Name: className}, class); err != nil {
		return capacity.Key{}, false, client.IgnoreNotFound(err)
	}
	amis, err := c.amis.List(ctx, class.Spec.AMISelectorTerms)
	if err != nil {
		return capacity.Key{}, false, fmt.Errorf("resolving the AMIs of EC2NodeClass %q for Node %s: %w", className, node.Name, err)
	}
	a, ok := ami.Select(amis, node.Labels)
	if !ok {
		return capacity.Key{}, false, nil
	}
	key := capacity.Key{InstanceType: typ, AMIID: a.ID}
	c.capacity.Observe(key, node.Name, node.Status.Allocatable)
	return key, true, nil
}
