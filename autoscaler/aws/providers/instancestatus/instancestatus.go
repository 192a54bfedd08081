package instancestatus

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/utils/clock"

	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// Category is the kind of a failed detail, with the values of Karpenter
// v1.14's instancestatus.Category (they label
// karpenter_interruption_instance_status_unhealthy_total{category}).
type Category string

const (
	// InstanceStatus is the instance status check (the guest's
	// reachability).
	InstanceStatus Category = "InstanceStatus"
	// SystemStatus is the system status check (the host).
	SystemStatus Category = "SystemStatus"
	// EventStatus is a scheduled event (reboot, maintenance, retirement,
	// stop) of the instance.
	EventStatus Category = "EventStatus"
)

// UnhealthyThreshold is how long a status check detail must have been
// failed (now - impairedSince) before it is returned: 120 s, Karpenter
// v1.14's instancestatus.UnhealthyThreshold. Scheduled events are returned
// at once.
const UnhealthyThreshold = 120 * time.Second

// ScheduledEventCodes are the event.code values that List asks for, the
// five of Karpenter v1.14's filter (EC2 API Reference,
// InstanceStatusEvent.Code: instance-reboot, system-reboot,
// system-maintenance, instance-retirement, instance-stop).
var ScheduledEventCodes = []string{
	string(ec2types.EventCodeInstanceReboot),
	string(ec2types.EventCodeSystemReboot),
	string(ec2types.EventCodeSystemMaintenance),
	string(ec2types.EventCodeInstanceRetirement),
	string(ec2types.EventCodeInstanceStop),
}

// filterSets are List's three calls' filters, ORed by making one call each
// (filters of different names are ANDed by EC2).
var filterSets = [][]ec2types.Filter{
	{{Name: aws.String("instance-status.status"), Values: []string{string(ec2types.SummaryStatusImpaired)}}},
	{{Name: aws.String("system-status.status"), Values: []string{string(ec2types.SummaryStatusImpaired)}}},
	{{Name: aws.String("event.code"), Values: ScheduledEventCodes}},
}

// Detail is one failed check or one scheduled event of an instance.
type Detail struct {
	// Category is which check, or EventStatus.
	Category Category `json:"category"`
	// Name is the check's detail name ("reachability") or the event code
	// ("instance-retirement").
	Name string `json:"name"`
	// ImpairedSince is when the check failed (EC2's impairedSince), or,
	// for an event, when List saw it.
	ImpairedSince time.Time `json:"impairedSince"`
}

// HealthStatus is an instance with at least one failed detail; it is also
// the JSON of one instance in Report.
type HealthStatus struct {
	// InstanceID is the EC2 instance ID ("i-0abc…").
	InstanceID string `json:"instanceID"`
	// ImpairedSince is the earliest ImpairedSince of Details.
	ImpairedSince time.Time `json:"impairedSince"`
	// Details are the failed details, at least one; instance and system
	// check details first, then events, each in EC2's order.
	Details []Detail `json:"details"`
}

// Categories returns the distinct categories of h's details, in the order
// they first appear.
func (h HealthStatus) Categories() []Category {
	var out []Category
	for _, d := range h.Details {
		if !slices.Contains(out, d.Category) {
			out = append(out, d.Category)
		}
	}
	return out
}

// Provider lists the instances failing EC2 status checks. It is safe for
// concurrent use.
type Provider struct {
	ec2   ec2api.EC2API
	clock clock.PassiveClock
}

// New returns a Provider calling api (the batcher over the budgeted
// client, in the controller); clk times the scheduled events it sees.
func New(api ec2api.EC2API, clk clock.PassiveClock) *Provider {
	return &Provider{ec2: api, clock: clk}
}

// List returns the instances of the account and region with a failed
// status check or a scheduled event (package doc), in the order EC2
// returned them, with every failed detail whatever its age: Due says which
// have been failed for UnhealthyThreshold. It returns the first call's
// error, wrapped (ec2api.Code reads its AWS error code), and no statuses
// then: a poll acts on all of EC2's answer or on nothing.
func (p *Provider) List(ctx context.Context) ([]HealthStatus, error) {
	ctx = cloudprovider.WithPriority(ctx, cloudprovider.PrioritySpeculative)
	seen := map[string]bool{}
	var raw []ec2types.InstanceStatus
	for _, filters := range filterSets {
		pager := ec2.NewDescribeInstanceStatusPaginator(p.ec2, &ec2.DescribeInstanceStatusInput{Filters: filters})
		for pager.HasMorePages() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing EC2 instance status (filter %s): %w", aws.ToString(filters[0].Name), err)
			}
			for _, s := range page.InstanceStatuses {
				id := aws.ToString(s.InstanceId)
				if id == "" || seen[id] {
					continue
				}
				seen[id] = true
				raw = append(raw, s)
			}
		}
	}
	now := p.clock.Now()
	var out []HealthStatus
	for _, s := range raw {
		if h, ok := healthOf(s, now); ok {
			out = append(out, h)
		}
	}
	return out, nil
}

// healthOf returns the failed details of s seen at now, and false when
// none is failed.
func healthOf(s ec2types.InstanceStatus, now time.Time) (HealthStatus, bool) {
	h := HealthStatus{InstanceID: aws.ToString(s.InstanceId)}
	checks := func(sum *ec2types.InstanceStatusSummary, c Category) {
		if sum == nil {
			return
		}
		for _, d := range sum.Details {
			since := aws.ToTime(d.ImpairedSince)
			if d.Status != ec2types.StatusTypeFailed {
				continue
			}
			h.Details = append(h.Details, Detail{Category: c, Name: string(d.Name), ImpairedSince: since})
		}
	}
	checks(s.InstanceStatus, InstanceStatus)
	checks(s.SystemStatus, SystemStatus)
	for _, e := range s.Events {
		// As Karpenter: a scheduled event means the host needs vacating,
		// whatever its notBefore; it counts from when it is seen.
		h.Details = append(h.Details, Detail{Category: EventStatus, Name: string(e.Code), ImpairedSince: now})
	}
	if len(h.Details) == 0 {
		return HealthStatus{}, false
	}
	h.ImpairedSince = earliest(h.Details)
	return h, true
}

// Due returns the details of h that call for action at now, as Karpenter
// v1.14 filters them: status check details failed for at least
// UnhealthyThreshold, and every scheduled event. It returns false when
// none is due (h is then still within its toleration).
func Due(h HealthStatus, now time.Time) (HealthStatus, bool) {
	due := HealthStatus{InstanceID: h.InstanceID}
	for _, d := range h.Details {
		if d.Category == EventStatus || now.Sub(d.ImpairedSince) >= UnhealthyThreshold {
			due.Details = append(due.Details, d)
		}
	}
	if len(due.Details) == 0 {
		return HealthStatus{}, false
	}
	due.ImpairedSince = earliest(due.Details)
	return due, true
}

// DueAt is when the first status check detail of h reaches
// UnhealthyThreshold; for a status with a scheduled event it is that
// event's ImpairedSince (due at once).
func DueAt(h HealthStatus) time.Time {
	var at time.Time
	for _, d := range h.Details {
		t := d.ImpairedSince
		if d.Category != EventStatus {
			t = t.Add(UnhealthyThreshold)
		}
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	return at
}

func earliest(ds []Detail) time.Time {
	return slices.MinFunc(ds, func(a, b Detail) int { return a.ImpairedSince.Compare(b.ImpairedSince) }).ImpairedSince
}

// HandlerPath is where the instance status controller serves its Report
// on the controller's status address, read by `kubectl karpx status`.
const HandlerPath = "/instancestatus"

// Report is the instance status controller's last poll, as JSON at
// HandlerPath.
type Report struct {
	// Polled is when the last poll's List returned (zero: none yet).
	Polled time.Time `json:"polled"`
	// Error is the last poll's error, empty when it succeeded.
	Error string `json:"error,omitempty"`
	// Instances are the instances of the last successful poll that belong
	// to a NodeClaim, in EC2's order.
	Instances []ReportedInstance `json:"instances"`
}

// ReportedInstance is one failing instance of a NodeClaim.
type ReportedInstance struct {
	HealthStatus
	// NodeClaim, NodePool and Node name the instance's objects (Node and
	// NodePool empty when it has none).
	NodeClaim string `json:"nodeClaim"`
	NodePool  string `json:"nodePool,omitempty"`
	Node      string `json:"node,omitempty"`
	// DueAt is when action is taken (DueAt of HealthStatus).
	DueAt time.Time `json:"dueAt"`
	// Acted is true once the NodeClaim was deleted for it (or was being
	// deleted already).
	Acted bool `json:"acted"`
}
