package cloudprovider

import (
	"context"
	"fmt"
	"slices"
	"sort"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/providers/ami"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation"
	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
	"github.com/karpx/karpx/autoscaler/aws/providers/launchtemplate"
	"github.com/karpx/karpx/autoscaler/aws/providers/subnet"
	"github.com/karpx/karpx/autoscaler/aws/providers/userdata"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/catalog"
	"github.com/karpx/karpx/requirements"
)

// candidate is an instance type that can satisfy a NodeClaim, with the
// offerings (of one capacity type) it may launch in.
type candidate struct {
	it        *cloudprovider.InstanceType
	offerings []cloudprovider.Offering
	price     float64
}

// Create implements cloudprovider.CloudProvider.
func (c *CloudProvider) Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	if nodeClaim.Spec.NodeClassRef == nil || nodeClaim.Spec.NodeClassRef.Name == "" {
		return nil, &cloudprovider.NodeClassNotReadyError{Reason: fmt.Sprintf("NodeClaim %q has no spec.nodeClassRef.name", nodeClaim.Name)}
	}
	className, poolName := nodeClaim.Spec.NodeClassRef.Name, nodeClaim.Labels[karpv1.NodePoolLabelKey]
	log := c.log.WithValues("NodeClaim", nodeClaim.Name, "NodePool", poolName, "EC2NodeClass", className)
	r, err := c.resolve(ctx, className)
	if err != nil {
		return nil, fmt.Errorf("creating NodeClaim %q: %w", nodeClaim.Name, err)
	}
	types, prioritized, err := c.overlaid(nodeClaim, r.instanceTypes)
	if err != nil {
		return nil, fmt.Errorf("creating NodeClaim %q: %w", nodeClaim.Name, err)
	}
	reqs := requirements.ParseNodeClaim(nodeClaim.Spec.Requirements) // once, then matched against every type
	capacityType, candidates := c.candidates(types, reqs, nodeClaim.Spec.Resources.Requests)
	if len(candidates) == 0 {
		return nil, &cloudprovider.InsufficientCapacityError{Err: fmt.Errorf("NodeClaim %q: no available offering of EC2NodeClass %q meets the requirements and resource requests (offerings may be marked unavailable after recent InsufficientInstanceCapacity)", nodeClaim.Name, className)}
	}
	configs, err := c.launchConfigs(ctx, r, nodeClaim, candidates)
	if err != nil {
		return nil, err
	}
	req := instance.LaunchRequest{
		NodeClaimName: nodeClaim.Name,
		NodeClaimUID:  string(nodeClaim.UID),
		CapacityType:  capacityType,
		Configs:       configs,
		Tags:          c.instanceTags(r.class, nodeClaim),
		Context:       r.class.Spec.Context,
		Prioritized:   prioritized,
	}
	if capacityType == cloudprovider.CapacityTypeReserved {
		req.ReservationType, req.Reservations = candidates[0].offerings[0].ReservationType, c.reservations
	}
	// What follows needs only the candidates: a Create waiting for its
	// CreateFleet (the EC2 API budget, the batcher) must not keep the whole
	// resolved catalogue (about 1,300 types with their offerings and
	// allocatable) alive, since a burst has a hundred of them waiting at
	// once (issue 29: 411 MiB peak RSS at 500 pods).
	r.instanceTypes = nil
	inst, err := c.instances.Launch(ctx, req)
	if err != nil {
		log.Error(err, "launching instance failed", "capacityType", capacityType, "candidates", len(candidates))
		return nil, err
	}
	log.Info("launched instance", "instanceID", inst.ID, "instanceType", inst.Type, "zone", inst.Zone, "capacityType", inst.CapacityType, "imageID", inst.ImageID)
	c.primeNetwork(inst, r)
	out := nodeClaim.DeepCopy()
	c.fillFromInstance(out, inst)
	metav1.SetMetaDataAnnotation(&out.ObjectMeta, NodeClassHashAnnotationKey, nodeClassHash(r.class, c.opts.ClusterCABundle))
	metav1.SetMetaDataAnnotation(&out.ObjectMeta, NodeClassHashVersionAnnotationKey, NodeClassHashVersion)
	if it, ok := candidateType(candidates, inst.Type); ok {
		out.Status.Allocatable = it.Allocatable.DeepCopy() // issue 9: estimate or learned, not the bare catalogue
		addOverlaidCapacity(out, it)
	}
	return out, nil
}

// candidates returns the capacity type to launch with and the types among
// types that meet reqs and fit requests, cheapest first, at most
// MaxInstanceTypes. The capacity type is reserved, then spot, then
// on-demand, the first the requirements allow that some candidate has an
// available offering of, as Karpenter's instance provider@v1.14.0
// prioritizes them. A reserved launch keeps one reservation type (that of
// the cheapest candidate) and one reservation per zone, since CreateFleet's
// DefaultTargetCapacityType differs between ODCRs and Capacity Blocks.
func (c *CloudProvider) candidates(types []*cloudprovider.InstanceType, reqs requirements.Requirements, requests corev1.ResourceList) (string, []candidate) {
	byCT := map[string][]candidate{}
	for _, it := range types {
		if !reqs.MatchInstanceType(it.Labels) || !fits(requests, it.Allocatable) {
			continue
		}
		perCT := map[string]*candidate{}
		for _, o := range it.Offerings {
			if !o.Available || !reqs.AllowsOffering(o.Zone, o.CapacityType) {
				continue
			}
			cd := perCT[o.CapacityType]
			if cd == nil {
				cd = &candidate{it: it, price: o.PriceUSDPerHour}
				perCT[o.CapacityType] = cd
			}
			cd.offerings = append(cd.offerings, o)
			cd.price = min(cd.price, o.PriceUSDPerHour)
		}
		for ct, cd := range perCT {
			byCT[ct] = append(byCT[ct], *cd)
		}
	}
	ct := cloudprovider.CapacityTypeOnDemand
	switch {
	case len(byCT[cloudprovider.CapacityTypeReserved]) > 0:
		ct = cloudprovider.CapacityTypeReserved
	case len(byCT[cloudprovider.CapacityTypeSpot]) > 0:
		ct = cloudprovider.CapacityTypeSpot
	}
	cands := byCT[ct]
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].price != cands[j].price {
			return cands[i].price < cands[j].price
		}
		return cands[i].it.Name < cands[j].it.Name
	})
	if ct == cloudprovider.CapacityTypeReserved {
		cands = oneReservationPerZone(cands)
	}
	if len(cands) > c.opts.MaxInstanceTypes {
		// A copy: the rest of the sorted array would stay reachable
		// through a re-slice for as long as the launch waits.
		cands = slices.Clone(cands[:c.opts.MaxInstanceTypes])
	}
	return ct, cands
}

// candidateType returns the instance type of the candidate named name.
func candidateType(cands []candidate, name string) (*cloudprovider.InstanceType, bool) {
	for _, cd := range cands {
		if cd.it.Name == name {
			return cd.it, true
		}
	}
	return nil, false
}

// oneReservationPerZone keeps, of reserved candidates sorted cheapest
// first, the offerings of the first candidate's reservation type, and of
// those the first reservation of each zone; candidates left without an
// offering are dropped.
func oneReservationPerZone(cands []candidate) []candidate {
	rtype := cands[0].offerings[0].ReservationType
	taken := map[string]bool{}
	out := cands[:0:0]
	for _, cd := range cands {
		var keep []cloudprovider.Offering
		for _, o := range cd.offerings {
			if o.ReservationType == rtype && !taken[o.Zone] {
				taken[o.Zone] = true
				keep = append(keep, o)
			}
		}
		if len(keep) > 0 {
			cd.offerings = keep
			out = append(out, cd)
		}
	}
	return out
}

// fits reports whether allocatable covers every request.
func fits(requests, allocatable corev1.ResourceList) bool {
	for name, q := range requests {
		a, ok := allocatable[name]
		if !ok {
			if q.IsZero() {
				continue
			}
			return false
		}
		if a.Cmp(q) < 0 {
			return false
		}
	}
	return true
}

// launchConfigs pairs each candidate with its best-fitting AMI, ensures one
// launch template per AMI and returns the CreateFleet configs.
func (c *CloudProvider) launchConfigs(ctx context.Context, r *resolved, nodeClaim *karpv1.NodeClaim, cands []candidate) ([]instance.LaunchConfig, error) {
	// The subnet with the most free addresses represents each zone.
	bestSubnet := map[string]subnet.Subnet{}
	for _, s := range r.subnets {
		if b, ok := bestSubnet[s.Zone]; !ok || s.AvailableIPs > b.AvailableIPs {
			bestSubnet[s.Zone] = s
		}
	}
	taints := append(append([]corev1.Taint{karpv1.UnregisteredNoExecuteTaint}, nodeClaim.Spec.Taints...), nodeClaim.Spec.StartupTaints...)
	ud, err := userdata.Generate(userdata.Options{
		Family: r.family, ClusterName: c.opts.ClusterName, ClusterEndpoint: c.opts.ClusterEndpoint,
		CABundle: c.opts.ClusterCABundle, ClusterCIDR: c.opts.ClusterCIDR, Kubelet: r.class.Spec.Kubelet,
		Labels: nodeLabels(nodeClaim), Taints: taints, CustomUserData: r.class.Spec.UserData,
	})
	if err != nil {
		return nil, &cloudprovider.NodeClassNotReadyError{NodeClass: r.class.Name, Reason: err.Error()}
	}
	// One launch template per AMI, and per reservation for a reserved
	// launch (the template names the reservation it targets).
	byAMI := map[string]*instance.LaunchConfig{}
	var order []string
	for _, cd := range cands {
		a, ok := ami.Select(r.amis, cd.it.Labels)
		if !ok {
			continue
		}
		for _, o := range cd.offerings {
			s, ok := bestSubnet[o.Zone]
			if !ok {
				continue
			}
			key := a.ID + "/" + o.ReservationID
			cfg := byAMI[key]
			if cfg == nil {
				t := c.template(r, a.ID, ud)
				t.CapacityReservationID, t.CapacityBlock = o.ReservationID, o.ReservationType == capacityreservation.TypeCapacityBlock
				t.NoReservations = c.opts.ReservedCapacity && o.ReservationID == ""
				name, err := c.launchTemplates.Ensure(ctx, t)
				if err != nil {
					if code := ec2api.Code(err); ec2api.IsPermanent(code) {
						return nil, &cloudprovider.LaunchError{Code: code, Err: fmt.Errorf("EC2NodeClass %q: %w", r.class.Name, err)}
					}
					return nil, fmt.Errorf("EC2NodeClass %q: %w", r.class.Name, err)
				}
				cfg = &instance.LaunchConfig{LaunchTemplateName: name, ImageID: a.ID}
				byAMI[key] = cfg
				order = append(order, key)
			}
			cfg.Overrides = append(cfg.Overrides, instance.Override{InstanceType: cd.it.Name, SubnetID: s.ID, Zone: o.Zone, ReservationID: o.ReservationID, Priority: o.PriceUSDPerHour})
		}
	}
	configs := make([]instance.LaunchConfig, 0, len(order))
	for _, id := range order {
		if len(byAMI[id].Overrides) > 0 {
			configs = append(configs, *byAMI[id])
		}
	}
	if len(configs) == 0 {
		return nil, &cloudprovider.InsufficientCapacityError{Err: fmt.Errorf("NodeClaim %q: no candidate instance type has a subnet in its zones", nodeClaim.Name)}
	}
	return configs, nil
}

// template builds the launch template content of one AMI.
func (c *CloudProvider) template(r *resolved, imageID, userData string) launchtemplate.Template {
	spec := r.class.Spec
	t := launchtemplate.Template{
		ImageID:                  imageID,
		UserData:                 userData,
		BlockDeviceMappings:      spec.BlockDeviceMappings,
		MetadataOptions:          spec.MetadataOptions,
		Tags:                     c.classTags(r.class),
		DetailedMonitoring:       spec.DetailedMonitoring != nil && *spec.DetailedMonitoring,
		AssociatePublicIPAddress: spec.AssociatePublicIPAddress,
	}
	for _, g := range r.securityGroups {
		t.SecurityGroupIDs = append(t.SecurityGroupIDs, g.ID)
	}
	if len(t.BlockDeviceMappings) == 0 {
		t.BlockDeviceMappings = launchtemplate.DefaultBlockDeviceMappings(r.family)
	}
	if t.MetadataOptions == nil {
		t.MetadataOptions = launchtemplate.DefaultMetadataOptions()
	}
	switch {
	case spec.InstanceProfile != nil:
		t.InstanceProfile = *spec.InstanceProfile
	case r.class.Status.InstanceProfile != "":
		t.InstanceProfile = r.class.Status.InstanceProfile
	}
	return t
}

// classTags are the tags of everything created for a class: spec.tags plus
// the cluster ownership and class tags, which win over spec.tags.
func (c *CloudProvider) classTags(class *v1.EC2NodeClass) map[string]string {
	tags := map[string]string{}
	for k, v := range class.Spec.Tags {
		tags[k] = v
	}
	tags[instance.ClusterTagKey(c.opts.ClusterName)] = "owned"
	tags[instance.TagEKSClusterName] = c.opts.ClusterName
	tags[instance.TagNodeClass] = class.Name
	return tags
}

// instanceTags are classTags plus the NodePool, NodeClaim and Name tags.
func (c *CloudProvider) instanceTags(class *v1.EC2NodeClass, nodeClaim *karpv1.NodeClaim) map[string]string {
	tags := c.classTags(class)
	tags[instance.TagNodePool] = nodeClaim.Labels[karpv1.NodePoolLabelKey]
	tags[instance.TagNodeClaim] = nodeClaim.Name
	tags[instance.TagName] = nodeClaim.Name
	return tags
}

// nodeLabels are the labels the kubelet registers with: the NodeClaim's
// labels plus every single-valued In requirement, except the per-offering
// keys (zone, capacity type, instance type) that depend on what EC2 picks
// and would split otherwise identical launch templates.
func nodeLabels(nodeClaim *karpv1.NodeClaim) map[string]string {
	labels := requirements.SingleValueLabels(nodeClaim.Spec.Requirements)
	for k, v := range nodeClaim.Labels {
		labels[k] = v
	}
	for _, k := range []string{corev1.LabelTopologyZone, corev1.LabelTopologyRegion, karpv1.CapacityTypeLabelKey, corev1.LabelInstanceTypeStable} {
		delete(labels, k)
	}
	return labels
}

// fillFromInstance sets the provider ID, image, capacity and labels of the
// launched instance on nodeClaim.
func (c *CloudProvider) fillFromInstance(nodeClaim *karpv1.NodeClaim, inst *instance.Instance) {
	if nodeClaim.Labels == nil {
		nodeClaim.Labels = map[string]string{}
	}
	if it, ok := catalog.Get(inst.Type); ok {
		for k, v := range it.Labels {
			nodeClaim.Labels[k] = v
		}
		nodeClaim.Status.Capacity = it.Capacity()
		nodeClaim.Status.Allocatable = it.Allocatable.DeepCopy()
	}
	nodeClaim.Labels[corev1.LabelInstanceTypeStable] = inst.Type
	nodeClaim.Labels[corev1.LabelTopologyZone] = inst.Zone
	nodeClaim.Labels[karpv1.CapacityTypeLabelKey] = inst.CapacityType
	if inst.ReservationID != "" {
		nodeClaim.Labels[LabelCapacityReservationID] = inst.ReservationID
		nodeClaim.Labels[LabelCapacityReservationType] = inst.ReservationType
	}
	if _, ok := nodeClaim.Labels[corev1.LabelArchStable]; !ok {
		if a := archOf(inst.Type); a != "" {
			nodeClaim.Labels[corev1.LabelArchStable] = a
		}
	}
	nodeClaim.Status.ProviderID = instance.ProviderID(inst.Zone, inst.ID)
	nodeClaim.Status.ImageID = inst.ImageID
}

// Labels of a node in a capacity reservation (Karpenter's
// v1.LabelCapacityReservationID / LabelCapacityReservationType@v1.14.0).
const (
	LabelCapacityReservationID   = "karpenter.k8s.aws/capacity-reservation-id"
	LabelCapacityReservationType = "karpenter.k8s.aws/capacity-reservation-type"
)

// archOf returns the architecture of a catalogue type, or "".
func archOf(instanceType string) string {
	if it, ok := catalog.Get(instanceType); ok {
		return it.Arch()
	}
	return ""
}

// Get implements cloudprovider.CloudProvider.
func (c *CloudProvider) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	id, err := instance.ParseProviderID(providerID)
	if err != nil {
		return nil, &cloudprovider.NodeClaimNotFoundError{Err: err}
	}
	inst, err := c.instances.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.nodeClaimView(inst), nil
}

// List implements cloudprovider.CloudProvider.
func (c *CloudProvider) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	insts, err := c.instances.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*karpv1.NodeClaim, 0, len(insts))
	for _, inst := range insts {
		out = append(out, c.nodeClaimView(inst))
	}
	return out, nil
}

// Delete implements cloudprovider.CloudProvider. One DescribeInstances
// (through the batcher) tells whether the instance is still there: gone or
// terminated is *cloudprovider.NodeClaimNotFoundError, shutting-down is nil
// without a second TerminateInstances (as Karpenter's AWS provider v1.14.0
// skips it, pkg/providers/instance Delete). Otherwise one TerminateInstances
// (through the batcher) is issued and its answer is the result: nil when
// EC2 reports the instance shutting-down or terminated, an error naming the
// state otherwise, so the caller retries. No DescribeInstances follows the
// terminate.
func (c *CloudProvider) Delete(ctx context.Context, nodeClaim *karpv1.NodeClaim) error {
	if nodeClaim.Status.ProviderID == "" {
		return &cloudprovider.NodeClaimNotFoundError{Err: fmt.Errorf("NodeClaim %q has no status.providerID: no instance was launched", nodeClaim.Name)}
	}
	id, err := instance.ParseProviderID(nodeClaim.Status.ProviderID)
	if err != nil {
		return &cloudprovider.NodeClaimNotFoundError{Err: fmt.Errorf("NodeClaim %q: %w", nodeClaim.Name, err)}
	}
	inst, err := c.instances.Get(ctx, id)
	if err != nil {
		return err
	}
	if inst.State == string(ec2types.InstanceStateNameShuttingDown) {
		return nil
	}
	state, err := c.instances.Terminate(ctx, id)
	if err != nil {
		return err
	}
	switch state {
	case string(ec2types.InstanceStateNameShuttingDown), string(ec2types.InstanceStateNameTerminated):
	default:
		return fmt.Errorf("NodeClaim %q: TerminateInstances answered state %q for instance %s, want shutting-down or terminated; retrying", nodeClaim.Name, state, id)
	}
	c.log.Info("terminating instance", "NodeClaim", nodeClaim.Name, "NodePool", nodeClaim.Labels[karpv1.NodePoolLabelKey], "instanceID", id, "state", state)
	return nil
}

// nodeClaimView is the NodeClaim Get and List report for an instance:
// name from the karpenter.sh/nodeclaim tag, labels of its type, zone and
// capacity type, the NodePool label and nodeClassRef from tags, and the
// status of a launched NodeClaim. A shutting-down instance has a deletion
// timestamp.
func (c *CloudProvider) nodeClaimView(inst *instance.Instance) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{}
	nc.Name = inst.Tags[instance.TagNodeClaim]
	nc.CreationTimestamp = metav1.NewTime(inst.LaunchTime)
	if pool := inst.Tags[instance.TagNodePool]; pool != "" {
		nc.Labels = map[string]string{karpv1.NodePoolLabelKey: pool}
	}
	if class := inst.Tags[instance.TagNodeClass]; class != "" {
		nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: v1.Group, Kind: "EC2NodeClass", Name: class}
	}
	if inst.State == "shutting-down" {
		now := metav1.NewTime(c.opts.Clock.Now())
		nc.DeletionTimestamp = &now
	}
	c.fillFromInstance(nc, inst)
	return nc
}

// primeNetwork caches what drift compares for a just-launched instance
// (its subnet, from CreateFleet's override, and its security groups, the
// ones every launch template of r names), so the SubnetDrift and
// SecurityGroupDrift checks need no DescribeInstances for it until the
// cache entry expires. Nothing is cached when the response named no
// subnet; the drift check then describes the instance once, as before.
func (c *CloudProvider) primeNetwork(inst *instance.Instance, r *resolved) {
	if inst.SubnetID == "" {
		return
	}
	primed := *inst
	primed.SecurityGroupIDs = make([]string, 0, len(r.securityGroups))
	for _, g := range r.securityGroups {
		primed.SecurityGroupIDs = append(primed.SecurityGroupIDs, g.ID)
	}
	c.networks.Add(inst.ID, &primed)
}
