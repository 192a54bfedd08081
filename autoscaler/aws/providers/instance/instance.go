package instance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/providers/instancetype"
	"github.com/karpx/karpx/autoscaler/aws/providers/launchtemplate"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// Tag keys karpx puts on instances and volumes. Source: the tags Karpenter's
// AWS provider sets (kubernetes.io/cluster/<name>, eks:eks-cluster-name,
// karpenter.sh/nodepool, karpenter.k8s.aws/ec2nodeclass, and, from its
// tagging controller, karpenter.sh/nodeclaim and Name). karpx does not tag
// instances with karpenter.sh/discovery: that tag marks the subnets and
// security groups selector terms discover, and an instance carrying it
// would be picked up by any selector using it.
const (
	TagNodePool         = karpv1.NodePoolLabelKey // karpenter.sh/nodepool
	TagNodeClaim        = "karpenter.sh/nodeclaim"
	TagNodeClass        = "karpenter.k8s.aws/ec2nodeclass"
	TagEKSClusterName   = "eks:eks-cluster-name"
	TagName             = "Name"
	clusterTagKeyPrefix = "kubernetes.io/cluster/"
)

// NodeClaimTagKeys are the tags the provider sets per NodeClaim
// (TagNodeClaim, TagName); every other launch tag is the same for all
// NodeClaims of a NodePool and EC2NodeClass. Pass them as
// batcher.Options.DeferredTagKeys so launches of different NodeClaims can
// share a CreateFleet call.
var NodeClaimTagKeys = []string{TagNodeClaim, TagName}

// ClusterTagKey returns "kubernetes.io/cluster/<clusterName>", whose value
// "owned" marks resources the cluster created.
func ClusterTagKey(clusterName string) string { return clusterTagKeyPrefix + clusterName }

// Instance is what karpx knows about an EC2 instance.
type Instance struct {
	// ID is the instance ID, "i-…".
	ID string
	// Type is the instance type.
	Type string
	// Zone is the availability zone.
	Zone string
	// CapacityType is "on-demand", "spot" or "reserved" (launched
	// targeted into a capacity reservation, preference
	// capacity-reservations-only, as Karpenter's capacityTypeFromInstance@v1.14.0).
	CapacityType string
	// ReservationID is the capacity reservation of a "reserved" instance.
	ReservationID string
	// ReservationType is "default" or "capacity-block" for a "reserved"
	// instance.
	ReservationType string
	// ImageID is the AMI the instance booted.
	ImageID string
	// SubnetID is the subnet of the primary interface.
	SubnetID string
	// SecurityGroupIDs are the IDs of the security groups of the
	// instance's interfaces (DescribeInstances groupSet), in EC2's order.
	SecurityGroupIDs []string
	// State is the EC2 state name ("pending", "running", "shutting-down", …).
	State string
	// LaunchTime is when EC2 launched it (zero right after Launch).
	LaunchTime time.Time
	// Tags are the instance's tags.
	Tags map[string]string
}

// Override is one candidate of a launch: an instance type in a subnet.
type Override struct {
	// InstanceType is the EC2 instance type.
	InstanceType string
	// SubnetID is the subnet to launch in.
	SubnetID string
	// Zone is the subnet's availability zone.
	Zone string
	// Priority is CreateFleet's override Priority (lower launches first),
	// used only with LaunchRequest.Prioritized: the offering's price in
	// USD per hour after NodeOverlays, as Karpenter's AWS provider sets it
	// (github.com/aws/karpenter-provider-aws v1.14.0
	// pkg/providers/instance/instance.go).
	Priority float64
	// ReservationID is the capacity reservation a "reserved" launch
	// targets in this override (its launch template names it), "" for
	// others.
	ReservationID string
}

// LaunchConfig is one launch template and the candidates that use it.
type LaunchConfig struct {
	// LaunchTemplateName is a name from launchtemplate.Provider.Ensure.
	LaunchTemplateName string
	// ImageID is the template's AMI, reported back in Instance.ImageID.
	ImageID string
	// Overrides are the candidates, at least one.
	Overrides []Override
}

// LaunchRequest describes one instance to launch.
type LaunchRequest struct {
	// NodeClaimName names the NodeClaim, for tags and errors.
	NodeClaimName string
	// NodeClaimUID is the NodeClaim's metadata.uid. When set, CreateFleet
	// carries a ClientToken derived from it and from the request (see
	// ClientToken), so that the same NodeClaim asking for the same launch
	// again (a retry after a lost answer, a controller restarted between
	// CreateFleet and the NodeClaim's status write) gets EC2's first
	// answer instead of a second instance.
	NodeClaimUID string
	// CapacityType is "on-demand", "spot" or "reserved".
	CapacityType string
	// ReservationType is "default" or "capacity-block" when CapacityType
	// is "reserved": CreateFleet's DefaultTargetCapacityType is on-demand
	// or capacity-block, as Karpenter's CreateFleetInputBuilder@v1.14.0
	// sends it.
	ReservationType string
	// Reservations, when set, hears of a launch into a reservation
	// (MarkLaunched) and of reservations EC2 found full
	// (MarkUnavailable, after ReservationCapacityExceeded).
	Reservations ReservationTracker
	// Configs are the launch templates with their candidates.
	Configs []LaunchConfig
	// Tags go on the instance and its volumes.
	Tags map[string]string
	// Context is the EC2NodeClass's spec.context, or nil.
	Context *string
	// Prioritized asks for the "prioritized" on-demand and
	// "capacity-optimized-prioritized" spot allocation strategies, with
	// each Override's Priority, instead of EC2's own lowest price: set when
	// a NodeOverlay changed a candidate's price (the NodeClaim carries
	// karpenter.sh/price-overlay-applied), as Karpenter's AWS provider does.
	Prioritized bool
}

// ReservationTracker counts the free places of capacity reservations
// (*capacityreservation.Provider implements it).
type ReservationTracker interface {
	MarkLaunched(id string)
	MarkUnavailable(ids ...string)
}

// Provider launches and reads instances. It is safe for concurrent use.
type Provider struct {
	api         ec2api.API
	clusterName string
	unavailable *instancetype.UnavailableOfferings
}

// NewProvider returns a Provider for cluster clusterName that marks
// unfulfillable offerings in unavailable.
func NewProvider(api ec2api.API, clusterName string, unavailable *instancetype.UnavailableOfferings) *Provider {
	return &Provider{api: api, clusterName: clusterName, unavailable: unavailable}
}

// Launch launches one instance. See the package documentation for the
// errors it returns.
func (p *Provider) Launch(ctx context.Context, req LaunchRequest) (*Instance, error) {
	in := fleetInput(req)
	out, err := p.api.CreateFleet(ctx, in)
	if err != nil {
		code := ec2api.Code(err)
		if ec2api.IsPermanent(code) {
			return nil, &cloudprovider.LaunchError{Code: code, Err: fmt.Errorf("CreateFleet for NodeClaim %q: %w", req.NodeClaimName, err)}
		}
		return nil, fmt.Errorf("CreateFleet for NodeClaim %q: %w", req.NodeClaimName, err)
	}
	zoneOf := map[string]string{}
	imageOf := map[string]string{}
	reservationOf := map[string]string{} // launch template name → reservation id
	for _, c := range req.Configs {
		imageOf[c.LaunchTemplateName] = c.ImageID
		for _, o := range c.Overrides {
			zoneOf[o.SubnetID] = o.Zone
			if o.ReservationID != "" {
				reservationOf[c.LaunchTemplateName] = o.ReservationID
			}
		}
	}
	reservationIn := func(lto *ec2types.LaunchTemplateAndOverridesResponse) string {
		if lto == nil || lto.LaunchTemplateSpecification == nil {
			return ""
		}
		return reservationOf[aws.ToString(lto.LaunchTemplateSpecification.LaunchTemplateName)]
	}
	// Mark every unfulfillable offering, even when another one launched.
	var ice, permanent, other []string
	permanentCode := ""
	for _, e := range out.Errors {
		code, msg := aws.ToString(e.ErrorCode), aws.ToString(e.ErrorMessage)
		typ, zone := overrideOf(e.LaunchTemplateAndOverrides, zoneOf)
		desc := fmt.Sprintf("%s (%s in %s): %s", code, typ, zone, msg)
		switch {
		case ec2api.IsInsufficientCapacity(code):
			if typ != "" && zone != "" {
				p.unavailable.MarkUnavailable(typ, zone, req.CapacityType)
			}
			if id := reservationIn(e.LaunchTemplateAndOverrides); id != "" && req.Reservations != nil {
				req.Reservations.MarkUnavailable(id)
			}
			ice = append(ice, desc)
		case ec2api.IsPermanent(code):
			permanent = append(permanent, desc)
			if permanentCode == "" {
				permanentCode = code
			}
		default:
			other = append(other, desc)
		}
	}
	for _, fi := range out.Instances {
		if len(fi.InstanceIds) == 0 {
			continue
		}
		inst := &Instance{ID: fi.InstanceIds[0], Type: string(fi.InstanceType), CapacityType: req.CapacityType, State: string(ec2types.InstanceStateNamePending), Tags: req.Tags}
		if fi.Lifecycle == ec2types.InstanceLifecycleSpot {
			inst.CapacityType = cloudprovider.CapacityTypeSpot
		}
		if lto := fi.LaunchTemplateAndOverrides; lto != nil {
			if o := lto.Overrides; o != nil {
				inst.SubnetID = aws.ToString(o.SubnetId)
				inst.Zone = firstNonEmpty(aws.ToString(o.AvailabilityZone), zoneOf[inst.SubnetID])
			}
			if s := lto.LaunchTemplateSpecification; s != nil {
				inst.ImageID = imageOf[aws.ToString(s.LaunchTemplateName)]
			}
		}
		inst.Zone = firstNonEmpty(aws.ToString(fi.AvailabilityZone), inst.Zone)
		if inst.ImageID == "" && len(req.Configs) == 1 {
			inst.ImageID = req.Configs[0].ImageID
		}
		if req.CapacityType == cloudprovider.CapacityTypeReserved {
			inst.CapacityType = cloudprovider.CapacityTypeReserved
			inst.ReservationID, inst.ReservationType = reservationIn(fi.LaunchTemplateAndOverrides), req.ReservationType
			if inst.ReservationID != "" && req.Reservations != nil {
				req.Reservations.MarkLaunched(inst.ReservationID)
			}
		}
		return inst, nil
	}
	switch {
	case len(permanent) > 0 && len(ice) == 0 && len(other) == 0:
		return nil, &cloudprovider.LaunchError{Code: permanentCode, Err: fmt.Errorf("CreateFleet for NodeClaim %q: %s", req.NodeClaimName, strings.Join(permanent, "; "))}
	case len(ice) > 0 && len(other) == 0 && len(permanent) == 0:
		return nil, &cloudprovider.InsufficientCapacityError{Err: fmt.Errorf("CreateFleet for NodeClaim %q: every %s offering failed: %s", req.NodeClaimName, req.CapacityType, strings.Join(ice, "; "))}
	case len(permanent) > 0 && len(other) == 0:
		// Some offerings lacked capacity, the rest were rejected: retrying
		// with the same class keeps failing on the rejected ones.
		return nil, &cloudprovider.LaunchError{Code: permanentCode, Err: fmt.Errorf("CreateFleet for NodeClaim %q: %s", req.NodeClaimName, strings.Join(append(permanent, ice...), "; "))}
	}
	all := append(append(other, permanent...), ice...)
	if len(all) == 0 {
		all = []string{"no instance and no error returned"}
	}
	return nil, fmt.Errorf("CreateFleet for NodeClaim %q: %s", req.NodeClaimName, strings.Join(all, "; "))
}

func overrideOf(lto *ec2types.LaunchTemplateAndOverridesResponse, zoneOf map[string]string) (string, string) {
	if lto == nil || lto.Overrides == nil {
		return "", ""
	}
	o := lto.Overrides
	return string(o.InstanceType), firstNonEmpty(aws.ToString(o.AvailabilityZone), zoneOf[aws.ToString(o.SubnetId)])
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ClientToken returns the CreateFleet idempotency token of the NodeClaim
// with uid for request in (whose ClientToken is ignored): "karpx-" and 40
// hex digits of the SHA-256 of the uid and the request, 46 characters
// (EC2 accepts up to 64; "Ensuring idempotency in Amazon EC2 API
// requests"). The request is part of it because EC2 answers a token reused
// with other parameters with IdempotentParameterMismatch: a NodeClaim that
// falls back to other offerings after InsufficientInstanceCapacity makes a
// new request.
func ClientToken(uid string, in *ec2.CreateFleetInput) string {
	c := *in
	c.ClientToken = nil
	body, err := json.Marshal(&c)
	if err != nil {
		body = []byte(fmt.Sprintf("%+v", c))
	}
	h := sha256.New()
	h.Write([]byte(uid))
	h.Write([]byte{0})
	h.Write(body)
	return "karpx-" + hex.EncodeToString(h.Sum(nil))[:40]
}

// fleetInput builds the CreateFleet request of req.
func fleetInput(req LaunchRequest) *ec2.CreateFleetInput {
	configs := make([]ec2types.FleetLaunchTemplateConfigRequest, 0, len(req.Configs))
	for _, c := range req.Configs {
		cfg := ec2types.FleetLaunchTemplateConfigRequest{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
				LaunchTemplateName: aws.String(c.LaunchTemplateName), Version: aws.String("$Latest"),
			},
		}
		for _, o := range c.Overrides {
			cfg.Overrides = append(cfg.Overrides, ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType: ec2types.InstanceType(o.InstanceType), SubnetId: aws.String(o.SubnetID),
			})
			if req.Prioritized {
				cfg.Overrides[len(cfg.Overrides)-1].Priority = aws.Float64(o.Priority)
			}
		}
		configs = append(configs, cfg)
	}
	tags := launchtemplate.Tags(req.Tags)
	in := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(1),
			DefaultTargetCapacityType: defaultTargetCapacityType(req),
		},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: tags},
		},
		Context: req.Context,
	}
	if req.NodeClaimUID != "" {
		in.ClientToken = aws.String(ClientToken(req.NodeClaimUID, in))
	}
	switch {
	case req.CapacityType == cloudprovider.CapacityTypeSpot && req.Prioritized:
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyCapacityOptimizedPrioritized}
	case req.CapacityType == cloudprovider.CapacityTypeSpot:
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	case in.TargetCapacitySpecification.DefaultTargetCapacityType == ec2types.DefaultTargetCapacityTypeCapacityBlock:
		// A Capacity Block fleet takes no on-demand allocation strategy.
	case req.Prioritized:
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyPrioritized}
	default:
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	return in
}

// defaultTargetCapacityType is CreateFleet's DefaultTargetCapacityType of
// req: a reserved launch is on-demand, or capacity-block for a Capacity
// Block (Karpenter's CreateFleetInputBuilder@v1.14.0); the others their
// capacity type.
func defaultTargetCapacityType(req LaunchRequest) ec2types.DefaultTargetCapacityType {
	if req.CapacityType != cloudprovider.CapacityTypeReserved {
		return ec2types.DefaultTargetCapacityType(req.CapacityType)
	}
	if req.ReservationType == "capacity-block" {
		return ec2types.DefaultTargetCapacityTypeCapacityBlock
	}
	return ec2types.DefaultTargetCapacityTypeOnDemand
}

// Get returns the instance with this ID. A missing or terminated instance
// is *cloudprovider.NodeClaimNotFoundError; shutting-down instances are
// returned (termination is still in progress).
func (p *Provider) Get(ctx context.Context, id string) (*Instance, error) {
	out, err := p.api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		if ec2api.IsNotFound(ec2api.Code(err)) {
			return nil, &cloudprovider.NodeClaimNotFoundError{Err: fmt.Errorf("instance %s: %w", id, err)}
		}
		return nil, fmt.Errorf("describing instance %s: %w", id, err)
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			if aws.ToString(i.InstanceId) != id {
				continue
			}
			inst := fromEC2(i)
			if inst.State == string(ec2types.InstanceStateNameTerminated) {
				return nil, &cloudprovider.NodeClaimNotFoundError{Err: fmt.Errorf("instance %s is terminated", id)}
			}
			return inst, nil
		}
	}
	return nil, &cloudprovider.NodeClaimNotFoundError{Err: fmt.Errorf("instance %s not returned by DescribeInstances", id)}
}

// List returns every instance of this cluster that karpx launched (tagged
// kubernetes.io/cluster/<cluster>=owned and karpenter.sh/nodepool) and that
// is not terminated, sorted by ID.
func (p *Provider) List(ctx context.Context) ([]*Instance, error) {
	pager := ec2.NewDescribeInstancesPaginator(p.api, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		ec2api.Filter("tag:"+ClusterTagKey(p.clusterName), "owned"),
		ec2api.Filter("tag-key", TagNodePool),
		ec2api.Filter("instance-state-name", "pending", "running", "stopping", "stopped", "shutting-down"),
	}})
	var out []*Instance
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing instances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				if inst := fromEC2(i); inst.State != string(ec2types.InstanceStateNameTerminated) {
					out = append(out, inst)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Terminate asks EC2 to terminate the instance and returns the state EC2
// answered for it (TerminateInstances' TerminatingInstances[].CurrentState:
// "shutting-down" or "terminated" after a successful call; "" when the
// answer does not name the instance). Callers learn the outcome from this
// answer and need no DescribeInstances after it. A missing instance is
// *cloudprovider.NodeClaimNotFoundError; any other error is returned
// wrapped, and the instance may still be running.
func (p *Provider) Terminate(ctx context.Context, id string) (string, error) {
	out, err := p.api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		if ec2api.IsNotFound(ec2api.Code(err)) {
			return "", &cloudprovider.NodeClaimNotFoundError{Err: fmt.Errorf("instance %s: %w", id, err)}
		}
		return "", fmt.Errorf("terminating instance %s: %w", id, err)
	}
	for _, sc := range out.TerminatingInstances {
		if aws.ToString(sc.InstanceId) == id && sc.CurrentState != nil {
			return string(sc.CurrentState.Name), nil
		}
	}
	return "", nil
}

func fromEC2(i ec2types.Instance) *Instance {
	inst := &Instance{
		ID: aws.ToString(i.InstanceId), Type: string(i.InstanceType), ImageID: aws.ToString(i.ImageId),
		SubnetID: aws.ToString(i.SubnetId), LaunchTime: aws.ToTime(i.LaunchTime),
		CapacityType: cloudprovider.CapacityTypeOnDemand, Tags: map[string]string{},
	}
	if i.Placement != nil {
		inst.Zone = aws.ToString(i.Placement.AvailabilityZone)
	}
	if i.State != nil {
		inst.State = string(i.State.Name)
	}
	if i.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		inst.CapacityType = cloudprovider.CapacityTypeSpot
	}
	if i.CapacityReservationId != nil && i.CapacityReservationSpecification != nil &&
		i.CapacityReservationSpecification.CapacityReservationPreference == ec2types.CapacityReservationPreferenceCapacityReservationsOnly {
		inst.CapacityType, inst.ReservationID, inst.ReservationType = cloudprovider.CapacityTypeReserved, aws.ToString(i.CapacityReservationId), "default"
		if i.InstanceLifecycle == ec2types.InstanceLifecycleTypeCapacityBlock {
			inst.ReservationType = "capacity-block"
		}
	}
	for _, t := range i.Tags {
		inst.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	for _, g := range i.SecurityGroups {
		inst.SecurityGroupIDs = append(inst.SecurityGroupIDs, aws.ToString(g.GroupId))
	}
	return inst
}

// ProviderID returns "aws:///<zone>/<instance-id>".
func ProviderID(zone, id string) string { return fmt.Sprintf("aws:///%s/%s", zone, id) }

// InstanceID returns the EC2 instance ID at the end of an AWS providerID
// ("aws:///us-east-1a/i-0abc…" → "i-0abc…"), or "" for another form: the
// lenient reading the controllers index and match NodeClaims by
// (ParseProviderID is the strict one, with an error naming the form).
func InstanceID(providerID string) string {
	if !strings.HasPrefix(providerID, "aws://") {
		return ""
	}
	id := providerID[strings.LastIndex(providerID, "/")+1:]
	if !strings.HasPrefix(id, "i-") {
		return ""
	}
	return id
}

// ParseProviderID returns the instance ID of an "aws:///<zone>/<id>"
// provider ID (the zone may be empty, as in "aws:///i-…" from some
// clusters).
func ParseProviderID(providerID string) (string, error) {
	rest, ok := strings.CutPrefix(providerID, "aws:///")
	if !ok {
		return "", fmt.Errorf("provider ID %q: want aws:///<zone>/<instance-id>", providerID)
	}
	id := rest[strings.LastIndex(rest, "/")+1:]
	if !strings.HasPrefix(id, "i-") {
		return "", fmt.Errorf("provider ID %q: no instance ID", providerID)
	}
	return id, nil
}
