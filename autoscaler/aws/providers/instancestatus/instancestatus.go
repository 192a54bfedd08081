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
	"github.com/karpx/karpx/autoscaler/aws/providers/instancestatus/statusreport"
)

// Category is the kind of a failed detail (statusreport.Category).
type Category = statusreport.Category

// The categories, Karpenter v1.14's instancestatus.Category values.
const (
	InstanceStatus = statusreport.InstanceStatus
	SystemStatus   = statusreport.SystemStatus
	EventStatus    = statusreport.EventStatus
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

// Detail is one failed check or one scheduled event of an instance
// (statusreport.Detail).
type Detail = statusreport.Detail

// HealthStatus is an instance with at least one failed detail
// (statusreport.HealthStatus).
type HealthStatus = statusreport.HealthStatus

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

// HandlerPath is where the instance status controller serves its
// statusreport.Report.
const HandlerPath = statusreport.HandlerPath

// Report is the controller's last poll (statusreport.Report).
type Report = statusreport.Report

// ReportedInstance is one failing instance of a NodeClaim
// (statusreport.ReportedInstance).
type ReportedInstance = statusreport.ReportedInstance
