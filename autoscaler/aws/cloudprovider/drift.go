package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/mitchellh/hashstructure/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
)

// The EC2NodeClass hash annotations, as Karpenter's AWS provider writes
// them on NodeClaims at launch (aws/karpenter-provider-aws
// pkg/apis/v1/labels.go@v1.14.0, AnnotationEC2NodeClassHash and
// AnnotationEC2NodeClassHashVersion).
const (
	// NodeClassHashAnnotationKey holds the hash of the EC2NodeClass's
	// launch-relevant fields at launch (a decimal uint64), compared on each
	// drift check with the class's current hash.
	NodeClassHashAnnotationKey = "karpenter.k8s.aws/ec2nodeclass-hash"
	// NodeClassHashVersionAnnotationKey holds the version of the hash
	// function that wrote NodeClassHashAnnotationKey. Hashes are compared
	// only when the versions are equal: a NodeClaim hashed by another
	// version is never drifted for its hash.
	NodeClassHashVersionAnnotationKey = "karpenter.k8s.aws/ec2nodeclass-hash-version"
	// NodeClassHashVersion is the version of nodeClassHash: Karpenter's
	// EC2NodeClassHashVersion (pkg/apis/v1/ec2nodeclass.go@v1.14.0, "v5",
	// the same in v1.14.3), whose hash nodeClassHash reproduces bit for
	// bit, so that a NodeClaim launched by Karpenter v1.14 is not drifted
	// by karpx for being Karpenter's.
	NodeClassHashVersion = "v5"
)

// Drift reasons IsDrifted returns: the DriftReason constants of
// Karpenter's AWS provider (pkg/cloudprovider/drift.go@v1.14.0), which
// become the reason of the NodeClaim's Drifted condition and so what
// users' alerts and queries match.
const (
	// DriftReasonAMI: the NodeClaim's status.imageID is not among the
	// images spec.amiSelectorTerms selects now.
	DriftReasonAMI = "AMIDrift"
	// DriftReasonSubnet: the instance's subnet is not among the class's
	// status.subnets.
	DriftReasonSubnet = "SubnetDrift"
	// DriftReasonSecurityGroup: the instance's security groups are not
	// exactly the class's status.securityGroups.
	DriftReasonSecurityGroup = "SecurityGroupDrift"
	// DriftReasonNodeClass: a hashed EC2NodeClass field changed since
	// launch (the two hash annotations differ at the same version).
	DriftReasonNodeClass = "NodeClassDrift"
	// DriftReasonCapacityReservation: the instance runs in a capacity
	// reservation (capacity type reserved) that is no longer among the
	// class's status.capacityReservations.
	DriftReasonCapacityReservation = "CapacityReservationDrift"
)

// instanceNetworkEntries bounds the cache of instances' network (subnet,
// security groups) that drift reads: one entry per running instance.
const instanceNetworkEntries = 16384

// nodeClassHash returns the hash of the class's launch-relevant fields the
// way Karpenter's AWS provider computes it (EC2NodeClass.Hash,
// pkg/apis/v1/ec2nodeclass.go@v1.14.0): hashstructure FormatV2 with
// SlicesAsSets, IgnoreZeroValue and ZeroNil over [spec, the resolved AMI
// family, the cluster CA bundle], where spec leaves out the fields
// Karpenter tags hash:"ignore" (the four selector-term lists and
// amiFamily, cleared here so IgnoreZeroValue skips them) and each EBS
// volumeSize is its canonical resource.Quantity string (Karpenter's
// hash:"string" on a Quantity). karpx's spec types carry Karpenter's Go
// type and field names, which hashstructure hashes, so the result is
// Karpenter's (TestNodeClassHashIsKarpenters holds the golden values).
// caBundle is the base64 PEM of the cluster CA, as Karpenter's
// GetCABundle returns it.
func nodeClassHash(class *v1.EC2NodeClass, caBundle string) string {
	spec := class.Spec.DeepCopy()
	spec.SubnetSelectorTerms = nil
	spec.SecurityGroupSelectorTerms = nil
	spec.CapacityReservationSelectorTerms = nil
	spec.AMISelectorTerms = nil
	spec.AMIFamily = nil
	for _, m := range spec.BlockDeviceMappings {
		if m == nil || m.EBS == nil || m.EBS.VolumeSize == nil {
			continue
		}
		if q, err := resource.ParseQuantity(*m.EBS.VolumeSize); err == nil {
			s := q.String()
			m.EBS.VolumeSize = &s
		}
	}
	family := class.AMIFamilyName()
	if family == "" {
		// Karpenter's EC2NodeClass.AMIFamily answers Custom when neither
		// amiFamily nor an alias is set (its CRD forbids that).
		family = v1.AMIFamilyCustom
	}
	h, err := hashstructure.Hash([]any{*spec, family, caBundle}, hashstructure.FormatV2,
		&hashstructure.HashOptions{SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true})
	if err != nil {
		return ""
	}
	return fmt.Sprint(h)
}

// staticDrift is Karpenter's areStaticFieldsDrifted of the AWS provider
// (pkg/cloudprovider/drift.go@v1.14.0): NodeClassDrift when the NodeClaim
// carries both hash annotations, its version is NodeClassHashVersion and
// its hash differs from the class's current one; "" otherwise (a NodeClaim
// without the annotations, or hashed by another version, is not drifted
// for its hash).
func staticDrift(nodeClaim *karpv1.NodeClaim, class *v1.EC2NodeClass, caBundle string) string {
	h, okHash := nodeClaim.Annotations[NodeClassHashAnnotationKey]
	version, okVersion := nodeClaim.Annotations[NodeClassHashVersionAnnotationKey]
	if !okHash || !okVersion || version != NodeClassHashVersion {
		return ""
	}
	if h != nodeClassHash(class, caBundle) {
		return DriftReasonNodeClass
	}
	return ""
}

// IsDrifted implements cloudprovider.CloudProvider with the checks and
// order of Karpenter's AWS provider (isNodeClassDrifted,
// pkg/cloudprovider/drift.go@v1.14.0): the static hash first (no AWS
// call), then the image (spec.amiSelectorTerms resolved, cached), then the
// instance's security groups and subnet against the class's status (one
// DescribeInstances per instance, cached), then the instance's capacity
// reservation against status.capacityReservations. Placement group drift
// does not apply: karpx launches into none (the webhook denies
// placementGroupSelector). It returns an error,
// never a reason, when a check cannot be made (class missing, no image or
// network resolved, an EC2 error).
func (c *CloudProvider) IsDrifted(ctx context.Context, nodeClaim *karpv1.NodeClaim) (string, error) {
	if nodeClaim.Spec.NodeClassRef == nil || nodeClaim.Spec.NodeClassRef.Name == "" {
		return "", nil
	}
	name := nodeClaim.Spec.NodeClassRef.Name
	class, err := c.getNodeClass(ctx, name)
	if err != nil {
		return "", fmt.Errorf("NodeClaim %q: %w", nodeClaim.Name, err)
	}
	if reason := staticDrift(nodeClaim, class, c.opts.ClusterCABundle); reason != "" {
		return reason, nil
	}
	if reason, err := c.amiDrift(ctx, nodeClaim, class); reason != "" || err != nil {
		return reason, err
	}
	if nodeClaim.Status.ProviderID == "" {
		return "", nil
	}
	inst, err := c.instanceNetwork(ctx, nodeClaim.Status.ProviderID)
	if err != nil {
		return "", fmt.Errorf("NodeClaim %q: %w", nodeClaim.Name, err)
	}
	if reason, err := networkDrift(inst, class); reason != "" || err != nil {
		return reason, err
	}
	return reservationDrift(inst, class), nil
}

// reservationDrift returns DriftReasonCapacityReservation for a reserved
// instance whose reservation is not in the class's
// status.capacityReservations (it expired, was cancelled, or the selector
// terms no longer select it), as Karpenter's isCapacityReservationDrifted
// (pkg/cloudprovider/drift.go@v1.14.0); "" otherwise.
func reservationDrift(inst *instance.Instance, class *v1.EC2NodeClass) string {
	if inst.ReservationID == "" {
		return ""
	}
	for _, cr := range class.Status.CapacityReservations {
		if cr.ID == inst.ReservationID {
			return ""
		}
	}
	return DriftReasonCapacityReservation
}

// amiDrift returns DriftReasonAMI when the NodeClaim's image is not among
// those the class's spec.amiSelectorTerms select now. Karpenter narrows
// the images to those whose requirements fit the instance type
// (isAMIDrifted, pkg/cloudprovider/drift.go@v1.14.0); karpx compares with
// every selected image, which differs only for an image that the
// selector still selects but for another architecture, which karpx never
// launched the NodeClaim with.
func (c *CloudProvider) amiDrift(ctx context.Context, nodeClaim *karpv1.NodeClaim, class *v1.EC2NodeClass) (string, error) {
	id := nodeClaim.Status.ImageID
	if id == "" {
		return "", nil
	}
	amis, err := c.amis.List(ctx, class.Spec.AMISelectorTerms)
	if err != nil {
		return "", fmt.Errorf("NodeClaim %q: EC2NodeClass %q: resolving spec.amiSelectorTerms: %w", nodeClaim.Name, class.Name, err)
	}
	if len(amis) == 0 {
		// No answer to compare with: not drift (nothing is replaced
		// because a selector matched nothing).
		return "", fmt.Errorf("NodeClaim %q: EC2NodeClass %q: spec.amiSelectorTerms matched no AMI", nodeClaim.Name, class.Name)
	}
	for _, a := range amis {
		if a.ID == id {
			return "", nil
		}
	}
	return DriftReasonAMI, nil
}

// networkDrift compares an instance's security groups and subnet with the
// class's status, in Karpenter's order (security groups first;
// areSecurityGroupsDrifted and isSubnetDrifted,
// pkg/cloudprovider/drift.go@v1.14.0): SecurityGroupDrift unless the
// instance's set of security group IDs equals the status's, SubnetDrift
// unless the instance's subnet is in the status. An empty status list is
// an error (nothing resolved to compare with), as in Karpenter.
func networkDrift(inst *instance.Instance, class *v1.EC2NodeClass) (string, error) {
	var errs []error
	if len(class.Status.SecurityGroups) == 0 {
		errs = append(errs, fmt.Errorf("EC2NodeClass %q: status.securityGroups is empty (spec.securityGroupSelectorTerms resolved nothing yet)", class.Name))
	}
	if len(class.Status.Subnets) == 0 {
		errs = append(errs, fmt.Errorf("EC2NodeClass %q: status.subnets is empty (spec.subnetSelectorTerms resolved nothing yet)", class.Name))
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	want := make([]string, 0, len(class.Status.SecurityGroups))
	for _, sg := range class.Status.SecurityGroups {
		want = append(want, sg.ID)
	}
	if !sameSet(want, inst.SecurityGroupIDs) {
		return DriftReasonSecurityGroup, nil
	}
	if !slices.ContainsFunc(class.Status.Subnets, func(s v1.Subnet) bool { return s.ID == inst.SubnetID }) {
		return DriftReasonSubnet, nil
	}
	return "", nil
}

// sameSet reports whether a and b hold the same strings, ignoring order
// and repeats.
func sameSet(a, b []string) bool {
	in := func(s []string, v string) bool { return slices.Contains(s, v) }
	for _, v := range a {
		if !in(b, v) {
			return false
		}
	}
	for _, v := range b {
		if !in(a, v) {
			return false
		}
	}
	return true
}

// instanceNetwork returns the instance behind providerID, from a cache of
// cache.DefaultTTL per instance (an instance's subnet never changes and
// its security groups rarely do; a drift check per NodeClaim and pass
// must not be a DescribeInstances each).
func (c *CloudProvider) instanceNetwork(ctx context.Context, providerID string) (*instance.Instance, error) {
	id, err := instance.ParseProviderID(providerID)
	if err != nil {
		return nil, err
	}
	if inst, ok := c.networks.Get(id); ok {
		return inst, nil
	}
	inst, err := c.instances.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	c.networks.Add(id, inst)
	return inst, nil
}
