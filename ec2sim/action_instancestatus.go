package ec2sim

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// DescribeInstanceStatus and its fault hook, FailStatusChecks.
//
// EC2 runs two status checks on every running instance, the system check
// (the host) and the instance check (the guest's reachability). Each has a
// summary status (ok | impaired | initializing | insufficient-data |
// not-applicable) and one detail, "reachability", whose status is passed |
// failed | initializing | insufficient-data, with impairedSince once it
// failed. Source: EC2 API Reference, DescribeInstanceStatus and the
// InstanceStatusSummary / InstanceStatusDetails types. In the simulator a
// running instance passes both checks from the moment it runs, unless
// FailStatusChecks (or POST /_sim/status-checks) made one fail; instances
// in other states report not-applicable, and appear only with
// IncludeAllInstances. The scheduled events of an instance (eventsSet) are
// those Interrupt announced: an instance-retirement or instance-reboot
// event (EC2 API Reference, InstanceStatusEvent; the AWS Health events
// AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED and
// AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED announce them), listed while
// the instance runs.

// maxStatusInstanceIDs is the most InstanceId.N one call may name ("Maximum
// 100 explicitly specified instance IDs", DescribeInstanceStatus).
const maxStatusInstanceIDs = 100

// Status check values (EC2 API Reference, InstanceStatusSummary and
// InstanceStatusDetails).
const (
	statusOK            = "ok"
	statusImpaired      = "impaired"
	statusNotApplicable = "not-applicable"
	reachabilityPassed  = "passed"
	reachabilityFailed  = "failed"
)

// StatusCheckFault makes the status checks of instances fail, as a host
// failure (System) or an unreachable guest (Instance) does, for
// DescribeInstanceStatus and so for Karpenter's node-repair health checks.
type StatusCheckFault struct {
	// InstanceIDs are the instances, at least one, every one known.
	InstanceIDs []string `json:"instanceIds"`
	// Instance fails the instance status check (reachability failed,
	// status impaired).
	Instance bool `json:"instance"`
	// System fails the system status check.
	System bool `json:"system"`
}

// Scheduled event codes (EC2 API Reference, InstanceStatusEvent.Code).
const (
	eventCodeInstanceRetirement = "instance-retirement"
	eventCodeInstanceReboot     = "instance-reboot"
)

// scheduledEvent is one scheduled event of an instance.
type scheduledEvent struct {
	id, code, description string
	notBefore, notAfter   time.Time
}

// statusFault is the failed checks of one instance and since when each
// failed (zero: passing).
type statusFault struct {
	instanceSince, systemSince time.Time
}

// FailStatusChecks makes the checks f names fail from now on (the
// simulator's clock is impairedSince) for each instance of f, until
// ClearStatusChecks. A check that already failed keeps its first
// impairedSince. It returns an error wrapping ErrUnknownInstance for an id
// the simulator does not know, and an error when f names no instance or no
// check; then nothing changes.
func (s *Simulator) FailStatusChecks(f StatusCheckFault) error {
	if len(f.InstanceIDs) == 0 {
		return fmt.Errorf("ec2sim: status check fault: instanceIds is empty; name at least one instance")
	}
	if !f.Instance && !f.System {
		return fmt.Errorf("ec2sim: status check fault: set instance, system or both to true")
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range f.InstanceIDs {
		if s.instances[id] == nil {
			return fmt.Errorf("ec2sim: status check fault: %w %s", ErrUnknownInstance, id)
		}
	}
	for _, id := range f.InstanceIDs {
		sf := s.instances[id].statusFault
		if f.Instance && sf.instanceSince.IsZero() {
			sf.instanceSince = now
		}
		if f.System && sf.systemSince.IsZero() {
			sf.systemSince = now
		}
		s.instances[id].statusFault = sf
		s.log.Info("Failing status checks", "instanceID", id, "instance", f.Instance, "system", f.System)
	}
	return nil
}

// ClearStatusChecks makes the status checks of the instances ids (every
// instance when none is given) pass again. Unknown ids are ignored.
func (s *Simulator) ClearStatusChecks(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(ids) == 0 {
		ids = s.order
	}
	for _, id := range ids {
		if in := s.instances[id]; in != nil {
			in.statusFault = statusFault{}
		}
	}
}

// registerStatusAdmin serves the status-check fault hook:
//
//	POST   /_sim/status-checks   StatusCheckFault → 204; 404 unknown instance, 400 otherwise
//	DELETE /_sim/status-checks   every check passes again (?instanceId=i-... for some)
func (s *Simulator) registerStatusAdmin(mux *http.ServeMux) {
	mux.HandleFunc("/_sim/status-checks", instanceFaultAdmin(s.FailStatusChecks, s.ClearStatusChecks))
}

type xmlStatusDetail struct {
	Name          string `xml:"name"`
	Status        string `xml:"status"`
	ImpairedSince string `xml:"impairedSince,omitempty"`
}

type xmlStatusSummary struct {
	Status  string            `xml:"status"`
	Details []xmlStatusDetail `xml:"details>item"`
}

type xmlStatusEvent struct {
	Code            string `xml:"code"`
	Description     string `xml:"description"`
	InstanceEventID string `xml:"instanceEventId"`
	NotBefore       string `xml:"notBefore"`
	NotAfter        string `xml:"notAfter"`
}

type xmlInstanceStatus struct {
	InstanceID         string           `xml:"instanceId"`
	AvailabilityZone   string           `xml:"availabilityZone"`
	AvailabilityZoneID string           `xml:"availabilityZoneId"`
	InstanceState      xmlState         `xml:"instanceState"`
	SystemStatus       xmlStatusSummary `xml:"systemStatus"`
	InstanceStatus     xmlStatusSummary `xml:"instanceStatus"`
	AttachedEbsStatus  xmlStatusSummary `xml:"attachedEbsStatus"`
	Events             []xmlStatusEvent `xml:"eventsSet>item"`
}

type describeInstanceStatusResponse struct {
	respMeta
	Statuses  []xmlInstanceStatus `xml:"instanceStatusSet>item"`
	NextToken string              `xml:"nextToken,omitempty"`
}

// statusSummary renders one check of an instance in state st that failed
// at since (zero: passing).
func statusSummary(st string, since time.Time) xmlStatusSummary {
	switch {
	case st != StateRunning:
		return xmlStatusSummary{Status: statusNotApplicable}
	case since.IsZero():
		return xmlStatusSummary{Status: statusOK, Details: []xmlStatusDetail{{Name: "reachability", Status: reachabilityPassed}}}
	}
	return xmlStatusSummary{Status: statusImpaired, Details: []xmlStatusDetail{{Name: "reachability", Status: reachabilityFailed, ImpairedSince: ec2Time(since)}}}
}

// instanceStatusOf renders the status of one instance at now.
func (s *Simulator) instanceStatusOf(in *instance, now time.Time) xmlInstanceStatus {
	st := in.state(now, &s.cfg)
	x := xmlInstanceStatus{
		InstanceID: in.id, AvailabilityZone: in.zone, AvailabilityZoneID: zoneID(s.cfg.Region, in.zone), InstanceState: stateXML(st),
		SystemStatus:      statusSummary(st, in.statusFault.systemSince),
		InstanceStatus:    statusSummary(st, in.statusFault.instanceSince),
		AttachedEbsStatus: statusSummary(st, time.Time{}),
	}
	if st == StateRunning {
		for _, e := range in.scheduledEvents {
			x.Events = append(x.Events, xmlStatusEvent{Code: e.code, Description: e.description, InstanceEventID: e.id,
				NotBefore: ec2Time(e.notBefore), NotAfter: ec2Time(e.notAfter)})
		}
	}
	return x
}

// instanceStatusField answers the filters of DescribeInstanceStatus (EC2
// API Reference lists them) from a rendered status.
func instanceStatusField(x *xmlInstanceStatus, name string) ([]string, bool) {
	reach := func(sum xmlStatusSummary) []string {
		var out []string
		for _, d := range sum.Details {
			if d.Name == "reachability" {
				out = append(out, d.Status)
			}
		}
		return out
	}
	switch name {
	case "availability-zone":
		return one(x.AvailabilityZone), true
	case "availability-zone-id":
		return one(x.AvailabilityZoneID), true
	case "instance-state-name":
		return one(x.InstanceState.Name), true
	case "instance-state-code":
		return one(strconv.Itoa(x.InstanceState.Code)), true
	case "instance-status.status":
		return one(x.InstanceStatus.Status), true
	case "instance-status.reachability":
		return reach(x.InstanceStatus), true
	case "system-status.status":
		return one(x.SystemStatus.Status), true
	case "system-status.reachability":
		return reach(x.SystemStatus), true
	case "attached-ebs-status.status":
		return one(x.AttachedEbsStatus.Status), true
	case "attached-ebs-status.reachability":
		return reach(x.AttachedEbsStatus), true
	case "operator.managed":
		return one("false"), true
	case "operator.principal":
		return nil, true
	case "event.code", "event.description", "event.instance-event-id", "event.not-after", "event.not-before", "event.not-before-deadline":
		var out []string
		for _, e := range x.Events {
			out = append(out, map[string]string{"event.code": e.Code, "event.description": e.Description,
				"event.instance-event-id": e.InstanceEventID, "event.not-after": e.NotAfter, "event.not-before": e.NotBefore}[name])
		}
		return out, true
	}
	return nil, false
}

func (s *Simulator) describeInstanceStatus(req *request) (any, error) {
	fs, err := parseFilters(req.p, &xmlInstanceStatus{}, instanceStatusField)
	if err != nil {
		return nil, err
	}
	ids := req.p.list("InstanceId")
	if len(ids) > maxStatusInstanceIDs {
		// EC2's code and text for it (as its SDK users report them; the
		// API reference names only the limit).
		return nil, newError("InvalidRequest", "%d exceeds the maximum number of instance IDs that can be specified (%d). Please specify fewer than %d instance IDs.",
			len(ids), maxStatusInstanceIDs, maxStatusInstanceIDs)
	}
	if len(ids) > 0 && req.p.has("MaxResults") {
		return nil, newError(CodeInvalidParameterCombination, "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	all, err := req.p.boolean("IncludeAllInstances")
	if err != nil {
		return nil, err
	}
	offset, size, err := req.p.pageRange(5, 1000, 1<<30)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gcLocked(req.now)
	if e := s.lookupInstancesLocked(ids); e != nil {
		return nil, e
	}
	var matched []xmlInstanceStatus
	for _, id := range s.order {
		in := s.instances[id]
		if len(ids) > 0 && !contains(ids, id) {
			continue
		}
		if !all && in.state(req.now, &s.cfg) != StateRunning {
			continue
		}
		x := s.instanceStatusOf(in, req.now)
		ok, ferr := matchFilters(&x, nil, fs, instanceStatusField)
		if ferr != nil {
			return nil, ferr
		}
		if ok {
			matched = append(matched, x)
		}
	}
	lo, hi, next := paginate(len(matched), offset, size)
	return &describeInstanceStatusResponse{Statuses: matched[lo:hi], NextToken: next}, nil
}
