package cloudprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/hydration"
	"github.com/karpx/karpx/autoscaler/aws/providers/ami"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation"
	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
	"github.com/karpx/karpx/autoscaler/aws/providers/instanceprofile"
	"github.com/karpx/karpx/autoscaler/aws/providers/userdata"
)

// Check is the outcome of one EC2NodeClass condition (v1.ConditionTypes).
type Check struct {
	// Type is the condition type, for example v1.ConditionTypeSubnetsReady.
	Type string
	// OK is the condition's status: true for True, false for False.
	OK bool
	// Reason is a CamelCase reason for a failed check ("SubnetsNotFound").
	Reason string
	// Message names the field, the selector term that matched nothing and
	// the fix; empty when OK.
	Message string
}

// NodeClassStatus is an EC2NodeClass's selector terms resolved into the
// values its status shows, with one Check per condition.
type NodeClassStatus struct {
	// Subnets, SecurityGroups and AMIs are the resolved resources in
	// status form; AMIs carry their requirements.
	Subnets        []v1.Subnet
	SecurityGroups []v1.SecurityGroup
	AMIs           []v1.AMI
	// InstanceProfile is spec.instanceProfile once IAM confirmed it
	// exists, or the profile karpx created for spec.role; "" when neither
	// is usable.
	InstanceProfile string
	// CapacityReservations are the reservations
	// spec.capacityReservationSelectorTerms resolved to (Options.ReservedCapacity
	// only), in status form.
	CapacityReservations []v1.CapacityReservation
	// Checks has one entry per v1.ConditionTypes, in that order, then
	// v1.ConditionTypeCapacityReservationsReady when
	// Options.ReservedCapacity is on.
	Checks []Check
}

// Ready reports whether every check passed.
func (s *NodeClassStatus) Ready() bool {
	for _, c := range s.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// ResolveNodeClass resolves class's subnets, security groups and AMIs and
// validates its AMI family and userData, as the EC2NodeClass status
// controller reports them. A selector that matches nothing, or a spec that
// cannot work, is a failed Check (persistent: it needs a change to the
// class or to the tagged resources); an AWS failure (throttling, 5xx,
// timeout) is returned as an error and is transient.
func (c *CloudProvider) ResolveNodeClass(ctx context.Context, class *v1.EC2NodeClass) (*NodeClassStatus, error) {
	st := &NodeClassStatus{}
	reg := c.opts.Hydration
	subnets, err := c.subnets.List(ctx, class.Spec.SubnetSelectorTerms)
	record(reg, hydration.Subnets, len(subnets), err)
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %q: resolving spec.subnetSelectorTerms: %w", class.Name, err)
	}
	zoneIDs := map[string]string{}
	if len(subnets) > 0 {
		// Zone IDs come with DescribeSubnets; the zone table fills gaps.
		for _, s := range subnets {
			if s.ZoneID == "" {
				if zoneIDs, err = c.instanceTypes.ZoneIDs(ctx); err != nil {
					return nil, fmt.Errorf("EC2NodeClass %q: %w", class.Name, err)
				}
				break
			}
		}
	}
	for _, s := range subnets {
		zid := s.ZoneID
		if zid == "" {
			zid = zoneIDs[s.Zone]
		}
		st.Subnets = append(st.Subnets, v1.Subnet{ID: s.ID, Zone: s.Zone, ZoneID: zid})
	}
	st.Checks = append(st.Checks, emptyCheck(v1.ConditionTypeSubnetsReady, "SubnetsNotFound", len(subnets) > 0,
		"subnetSelectorTerms", "subnet", termStrings(class.Spec.SubnetSelectorTerms), c.opts.Region,
		fmt.Sprintf("tag the subnets (for example karpenter.sh/discovery: %s) or fix the IDs", c.opts.ClusterName)))

	groups, err := c.securityGroups.List(ctx, class.Spec.SecurityGroupSelectorTerms)
	record(reg, hydration.SecurityGroups, len(groups), err)
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %q: resolving spec.securityGroupSelectorTerms: %w", class.Name, err)
	}
	for _, g := range groups {
		st.SecurityGroups = append(st.SecurityGroups, v1.SecurityGroup{ID: g.ID, Name: g.Name})
	}
	st.Checks = append(st.Checks, emptyCheck(v1.ConditionTypeSecurityGroupsReady, "SecurityGroupsNotFound", len(groups) > 0,
		"securityGroupSelectorTerms", "security group", termStrings(class.Spec.SecurityGroupSelectorTerms), c.opts.Region,
		fmt.Sprintf("tag the groups (for example karpenter.sh/discovery: %s) or fix the IDs and names", c.opts.ClusterName)))

	amis, err := c.amis.List(ctx, class.Spec.AMISelectorTerms)
	record(reg, hydration.AMIs, len(amis), err)
	var termErr *ami.TermError
	switch {
	case errors.As(err, &termErr):
		st.Checks = append(st.Checks, Check{Type: v1.ConditionTypeAMIsReady, Reason: "AMISelectorInvalid", Message: err.Error()})
	case err != nil:
		return nil, fmt.Errorf("EC2NodeClass %q: resolving spec.amiSelectorTerms: %w", class.Name, err)
	default:
		st.AMIs = ami.Status(amis)
		st.Checks = append(st.Checks, emptyCheck(v1.ConditionTypeAMIsReady, "AMIsNotFound", len(amis) > 0,
			"amiSelectorTerms", "AMI", termStrings(class.Spec.AMISelectorTerms), c.opts.Region,
			"check the AMI IDs, names, owners and tags"))
	}

	ipCheck, err := c.instanceProfileCheck(ctx, class, st)
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %q: %w", class.Name, err)
	}
	st.Checks = append(st.Checks, ipCheck)
	st.Checks = append(st.Checks, c.validationCheck(class))

	if c.opts.ReservedCapacity {
		// As Karpenter's nodeclass CapacityReservation reconciler@v1.14.0:
		// a failed description is an error (the last status stays), and
		// the condition is True once the terms resolved, even to nothing.
		rs, err := c.reservations.List(ctx, class.Spec.CapacityReservationSelectorTerms)
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %q: resolving spec.capacityReservationSelectorTerms: %w", class.Name, err)
		}
		st.CapacityReservations = capacityreservation.Status(rs, c.opts.Clock.Now())
		st.Checks = append(st.Checks, Check{Type: v1.ConditionTypeCapacityReservationsReady, OK: true})
	}
	return st, nil
}

// record reports one resolution to the registry: an AWS failure, or a
// success with n items (a term error is the class's fault, not the data's).
func record(reg *hydration.Registry, name string, n int, err error) {
	var termErr *ami.TermError
	switch {
	case err == nil, errors.As(err, &termErr):
		reg.Succeeded(name, n)
	default:
		reg.Failed(name, err)
	}
}

// emptyCheck is a check that fails when nothing matched, with a message
// naming every term of field (each matched nothing when the union is empty).
func emptyCheck(typ, reason string, ok bool, field, what string, terms []string, region, fix string) Check {
	if ok {
		return Check{Type: typ, OK: true}
	}
	parts := make([]string, 0, len(terms))
	for i, t := range terms {
		parts = append(parts, fmt.Sprintf("spec.%s[%d] %s", field, i, t))
	}
	return Check{Type: typ, Reason: reason, Message: fmt.Sprintf("%s matched no %s in %s; %s",
		strings.Join(parts, ", "), what, region, fix)}
}

// termStrings renders selector terms as compact JSON for messages.
func termStrings[T any](terms []T) []string {
	out := make([]string, 0, len(terms))
	for _, t := range terms {
		b, err := json.Marshal(t)
		if err != nil {
			b = []byte(fmt.Sprintf("%+v", t))
		}
		out = append(out, string(b))
	}
	return out
}

// instanceProfileCheck resolves the class's instance profile: for
// spec.instanceProfile, IAM must know it; for spec.role, karpx creates (or
// reuses) the class's profile holding the role. A missing role or profile,
// or IAM denying the calls, is a failed check whose message names the
// field and the fix; other IAM failures are returned (transient).
func (c *CloudProvider) instanceProfileCheck(ctx context.Context, class *v1.EC2NodeClass, st *NodeClassStatus) (Check, error) {
	var (
		prof *instanceprofile.Profile
		err  error
	)
	switch {
	case class.Spec.InstanceProfile != nil && *class.Spec.InstanceProfile != "":
		prof, err = c.profiles.Get(ctx, *class.Spec.InstanceProfile)
	case class.Spec.Role != "":
		prof, err = c.profiles.Ensure(ctx, class.Name, class.Spec.Role)
	default:
		return Check{Type: v1.ConditionTypeInstanceProfileReady, Reason: "InstanceProfileUnset",
			Message: "set exactly one of spec.role and spec.instanceProfile"}, nil
	}
	var ipErr *instanceprofile.Error
	switch {
	case errors.As(err, &ipErr):
		return Check{Type: v1.ConditionTypeInstanceProfileReady, Reason: ipErr.Reason, Message: ipErr.Message}, nil
	case err != nil:
		return Check{}, err
	}
	st.InstanceProfile = prof.Name
	return Check{Type: v1.ConditionTypeInstanceProfileReady, OK: true}, nil
}

// validationCheck checks what no selector resolves: a bootable AMI family
// and userData that merges with karpx's.
func (c *CloudProvider) validationCheck(class *v1.EC2NodeClass) Check {
	family, err := validateFamily(class)
	if err != nil {
		return Check{Type: v1.ConditionTypeValidationSucceeded, Reason: "AMIFamilyUnsupported", Message: err.Error()}
	}
	if _, err := userdata.Generate(userdata.Options{Family: family, ClusterName: c.opts.ClusterName, ClusterEndpoint: c.opts.ClusterEndpoint,
		CABundle: c.opts.ClusterCABundle, ClusterCIDR: c.opts.ClusterCIDR, Kubelet: class.Spec.Kubelet, CustomUserData: class.Spec.UserData}); err != nil {
		return Check{Type: v1.ConditionTypeValidationSucceeded, Reason: "UserDataInvalid", Message: err.Error()}
	}
	return Check{Type: v1.ConditionTypeValidationSucceeded, OK: true}
}

// validateFamily returns the AMI family class boots, or an error naming
// the field when it has none or karpx cannot launch it.
func validateFamily(class *v1.EC2NodeClass) (string, error) {
	family := class.AMIFamilyName()
	if family == "" {
		return "", errors.New("spec.amiFamily is required when spec.amiSelectorTerms has no alias term")
	}
	if strings.HasPrefix(family, "Windows") {
		field := "spec.amiFamily"
		for _, t := range class.Spec.AMISelectorTerms {
			if t.Alias != "" {
				field = fmt.Sprintf("spec.amiSelectorTerms[].alias %q", t.Alias)
			}
		}
		return "", fmt.Errorf("%s: karpx launches Linux nodes only (AL2023, AL2, Bottlerocket or Custom)", field)
	}
	return family, nil
}

// DeleteInstanceProfile deletes the instance profile karpx created for the
// spec.role of EC2NodeClass className, if any, and reports whether it
// deleted one. A profile this cluster does not own is left alone. Errors
// are IAM failures, to be retried.
func (c *CloudProvider) DeleteInstanceProfile(ctx context.Context, className string) (bool, error) {
	return c.profiles.Delete(ctx, className)
}

// DeleteLaunchTemplates deletes the launch templates karpx created for the
// EC2NodeClass className in this cluster (tagged with the class and the
// cluster's ownership tag) and returns how many. Errors are transient AWS
// failures.
func (c *CloudProvider) DeleteLaunchTemplates(ctx context.Context, className string) (int, error) {
	return c.launchTemplates.DeleteTagged(ctx, map[string]string{
		instance.TagNodeClass:                      className,
		instance.ClusterTagKey(c.opts.ClusterName): "owned",
	})
}
