package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/providers/ami"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation/reservationreport"
	"github.com/karpx/karpx/autoscaler/aws/providers/securitygroup"
	"github.com/karpx/karpx/autoscaler/aws/providers/subnet"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// resolved is an EC2NodeClass with its selector terms resolved.
type resolved struct {
	class          *v1.EC2NodeClass
	family         string
	subnets        []subnet.Subnet
	securityGroups []securitygroup.SecurityGroup
	amis           []ami.AMI
	// instanceTypes are the types sold in the subnets' zones that at least
	// one of amis can boot.
	instanceTypes []*cloudprovider.InstanceType
}

// resolve reads the EC2NodeClass name and resolves it. Empty selections and
// bad terms are *cloudprovider.NodeClassNotReadyError naming the field;
// AWS failures are returned wrapped (transient).
func (c *CloudProvider) resolve(ctx context.Context, name string) (*resolved, error) {
	class, err := c.getNodeClass(ctx, name)
	if err != nil {
		return nil, err
	}
	notReady := func(format string, args ...any) error {
		return &cloudprovider.NodeClassNotReadyError{NodeClass: name, Reason: fmt.Sprintf(format, args...)}
	}
	r := &resolved{class: class}
	if r.family, err = validateFamily(class); err != nil {
		return nil, notReady("%v", err)
	}
	if class.Spec.Role != "" && class.Status.InstanceProfile == "" {
		// Nodes launched without the role's instance profile never get
		// AWS credentials (and never join on EC2): wait for the status
		// controller to create it (transient), or report why it cannot.
		if ip := meta.FindStatusCondition(class.Status.Conditions, v1.ConditionTypeInstanceProfileReady); ip != nil && ip.Status == metav1.ConditionFalse {
			return nil, notReady("%s", ip.Message)
		}
		return nil, fmt.Errorf("EC2NodeClass %q: the instance profile of spec.role %q is not created yet (status.instanceProfile is empty); retrying", name, class.Spec.Role)
	}
	if r.subnets, err = c.subnets.List(ctx, class.Spec.SubnetSelectorTerms); err != nil {
		return nil, fmt.Errorf("EC2NodeClass %q: resolving spec.subnetSelectorTerms: %w", name, err)
	}
	if len(r.subnets) == 0 {
		return nil, notReady("spec.subnetSelectorTerms matched no subnet in %s; check the subnet IDs and tags (for example karpenter.sh/discovery: %s)", c.opts.Region, c.opts.ClusterName)
	}
	if r.securityGroups, err = c.securityGroups.List(ctx, class.Spec.SecurityGroupSelectorTerms); err != nil {
		return nil, fmt.Errorf("EC2NodeClass %q: resolving spec.securityGroupSelectorTerms: %w", name, err)
	}
	if len(r.securityGroups) == 0 {
		return nil, notReady("spec.securityGroupSelectorTerms matched no security group in %s; check the group IDs, names and tags (for example karpenter.sh/discovery: %s)", c.opts.Region, c.opts.ClusterName)
	}
	if r.amis, err = c.amis.List(ctx, class.Spec.AMISelectorTerms); err != nil {
		var termErr *ami.TermError
		if errors.As(err, &termErr) {
			return nil, notReady("%v", err)
		}
		return nil, fmt.Errorf("EC2NodeClass %q: resolving spec.amiSelectorTerms: %w", name, err)
	}
	if len(r.amis) == 0 {
		return nil, notReady("spec.amiSelectorTerms matched no AMI in %s; check the AMI IDs, names, owners and tags", c.opts.Region)
	}
	types, err := c.instanceTypes.List(ctx, subnet.Zones(r.subnets))
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %q: listing instance types: %w", name, err)
	}
	sel := ami.NewSelector(r.amis)
	for _, it := range types {
		if a, ok := sel.Select(it.Labels); ok {
			// Problem P3: what the type offers depends on its AMI and
			// the class's kubelet settings, and is learned from Nodes.
			it.Allocatable = c.allocatable(it, a.ID, class)
			r.instanceTypes = append(r.instanceTypes, it)
		}
	}
	if len(r.instanceTypes) == 0 {
		return nil, notReady("no instance type offered in the zones of the selected subnets (%s) fits the AMIs of spec.amiSelectorTerms", strings.Join(subnet.Zones(r.subnets), ", "))
	}
	if c.opts.ReservedCapacity {
		c.addReservedOfferings(r)
	}
	return r, nil
}

// ReservedPriceDivisor divides a type's on-demand price into the price of
// its reserved offerings (reservationreport.ReservedPriceDivisor, which
// `kubectl karpx explain` shares: 10,000,000 as in Karpenter's
// ReservedCapacityResolver@v1.14.0).
const ReservedPriceDivisor = reservationreport.ReservedPriceDivisor

// addReservedOfferings adds one "reserved" offering per capacity
// reservation of r.class.Status.CapacityReservations to the instance type
// it reserves, in a zone of r's subnets, as Karpenter's
// ReservedCapacityResolver@v1.14.0 does: priced at the on-demand price
// over ReservedPriceDivisor, available while the reservation has free
// places (as last described, less launches since), is not expiring (by
// its status or, for a Capacity Block, by the clock) and
// its (type, zone, reserved) offering is not marked unavailable after a
// ReservationCapacityExceeded.
func (c *CloudProvider) addReservedOfferings(r *resolved) {
	zones := map[string]bool{}
	for _, z := range subnet.Zones(r.subnets) {
		zones[z] = true
	}
	unavailable := c.instanceTypes.Unavailable()
	now := c.opts.Clock.Now()
	for _, cr := range r.class.Status.CapacityReservations {
		if !zones[cr.AvailabilityZone] {
			continue
		}
		for _, it := range r.instanceTypes {
			if it.Name != cr.InstanceType {
				continue
			}
			price := 0.0
			for _, o := range it.Offerings {
				if o.CapacityType == cloudprovider.CapacityTypeOnDemand {
					price = o.PriceUSDPerHour / ReservedPriceDivisor
					break
				}
			}
			rtype := cr.ReservationType
			if rtype == "" {
				rtype = capacityreservation.TypeDefault
			}
			// Expiring by the status or by the clock: the status is
			// rewritten once a minute, and a Capacity Block whose nodes
			// the expiration controller drains must not take their
			// replacements (autoscaler/aws/controllers/capacityreservation/expiration).
			var end time.Time
			if cr.EndTime != nil {
				end = cr.EndTime.Time
			}
			expiring := cr.State == capacityreservation.StateExpiring || capacityreservation.Expiring(rtype, end, now)
			free := c.reservations.Available(cr.ID)
			it.Offerings = append(it.Offerings, cloudprovider.Offering{
				Zone: cr.AvailabilityZone, CapacityType: cloudprovider.CapacityTypeReserved, PriceUSDPerHour: price,
				Available: !expiring && free > 0 &&
					!unavailable.IsUnavailable(it.Name, cr.AvailabilityZone, cloudprovider.CapacityTypeReserved),
				ReservationID: cr.ID, ReservationType: rtype, ReservationCapacity: free,
			})
		}
	}
}
