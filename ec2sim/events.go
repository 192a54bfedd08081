package ec2sim

import (
	"encoding/json"
	"time"
)

// This file is the simulated EventBridge: the events AWS sends to the
// interruption queue through the four rules Karpenter's getting-started
// CloudFormation template creates (source aws.ec2 with detail-type "EC2
// Spot Instance Interruption Warning", "EC2 Instance Rebalance
// Recommendation" and "EC2 Instance State-change Notification"; source
// aws.health with detail-type "AWS Health Event"), each delivered as one SQS
// message whose body is the event JSON. The state-change rule has no state
// filter, so every transition of every instance (pending, running,
// shutting-down, terminated) is sent while Config.InterruptionQueue is set;
// interruptions.go sends the others on demand.

// EventBridge event sources and detail types, as the AWS documentation
// names them: EC2 User Guide, "Spot Instance interruption notices", "EC2
// instance rebalance recommendations", "State change events for Amazon EC2
// instances"; AWS Health User Guide, "Reference: AWS Health events Amazon
// EventBridge schema".
const (
	// EventSourceEC2 is the source of EC2's events.
	EventSourceEC2 = "aws.ec2"
	// EventSourceHealth is the source of AWS Health events.
	EventSourceHealth = "aws.health"
	// DetailTypeSpotInterruption is the warning sent two minutes before EC2
	// reclaims a spot instance.
	DetailTypeSpotInterruption = "EC2 Spot Instance Interruption Warning"
	// DetailTypeRebalanceRecommendation is sent when a spot instance is at
	// elevated risk of interruption.
	DetailTypeRebalanceRecommendation = "EC2 Instance Rebalance Recommendation"
	// DetailTypeStateChange is sent on every instance state transition.
	DetailTypeStateChange = "EC2 Instance State-change Notification"
	// DetailTypeHealth is an AWS Health event (scheduled changes among them).
	DetailTypeHealth = "AWS Health Event"
)

// eventTimeFormat is EventBridge's "time": yyyy-mm-ddThh:mm:ssZ.
const eventTimeFormat = "2006-01-02T15:04:05Z"

// healthTimeFormat is how AWS Health event samples render startTime and
// endTime ("Sat, 05 Jun 2016 15:10:09 GMT", RFC 1123 in GMT).
const healthTimeFormat = "Mon, 02 Jan 2006 15:04:05 GMT"

// Event is an EventBridge event as delivered to an SQS target: the SQS
// message body is this JSON.
type Event struct {
	// Version is the EventBridge event version, "0".
	Version string `json:"version"`
	// ID is the event's unique id (a UUID).
	ID string `json:"id"`
	// DetailType is one of the DetailType* constants.
	DetailType string `json:"detail-type"`
	// Source is EventSourceEC2 or EventSourceHealth.
	Source string `json:"source"`
	// Account is the account id.
	Account string `json:"account"`
	// Time is when the event happened, yyyy-mm-ddThh:mm:ssZ (UTC, whole
	// seconds). For spot interruption warnings it is reclaim time minus
	// two minutes (see Interrupt).
	Time string `json:"time"`
	// Region is the region.
	Region string `json:"region"`
	// Resources are the ARNs (EC2 events:
	// arn:aws:ec2:<region>:<account>:instance/<id>) or, for AWS Health
	// events, the instance ids affected.
	Resources []string `json:"resources"`
	// Detail is the detail-type's document: SpotInterruptionDetail,
	// RebalanceRecommendationDetail, StateChangeDetail or HealthDetail.
	Detail json.RawMessage `json:"detail"`
}

// SpotInterruptionDetail is the detail of DetailTypeSpotInterruption.
type SpotInterruptionDetail struct {
	// InstanceID is the instance EC2 reclaims.
	InstanceID string `json:"instance-id"`
	// InstanceAction is "terminate", "stop" or "hibernate"; the simulator
	// only terminates.
	InstanceAction string `json:"instance-action"`
}

// RebalanceRecommendationDetail is the detail of
// DetailTypeRebalanceRecommendation.
type RebalanceRecommendationDetail struct {
	// InstanceID is the spot instance at elevated risk.
	InstanceID string `json:"instance-id"`
}

// StateChangeDetail is the detail of DetailTypeStateChange.
type StateChangeDetail struct {
	// InstanceID is the instance whose state changed.
	InstanceID string `json:"instance-id"`
	// State is pending, running, stopping, stopped, shutting-down or
	// terminated.
	State string `json:"state"`
}

// HealthDetail is the detail of DetailTypeHealth (the fields of the AWS
// Health EventBridge schema the simulator fills).
type HealthDetail struct {
	// EventARN is arn:aws:health:<region>::event/EC2/<code>/<code>_<id>.
	EventARN string `json:"eventArn"`
	// Service is "EC2".
	Service string `json:"service"`
	// EventTypeCode is e.g. AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED.
	EventTypeCode string `json:"eventTypeCode"`
	// EventTypeCategory is "scheduledChange" for the simulator's events.
	EventTypeCategory string `json:"eventTypeCategory"`
	// EventScopeCode is "ACCOUNT_SPECIFIC".
	EventScopeCode string `json:"eventScopeCode"`
	// CommunicationID identifies this communication of the event.
	CommunicationID string `json:"communicationId"`
	// StartTime is when the change begins, RFC 1123 in GMT
	// ("Sat, 05 Jun 2016 15:10:09 GMT"); Config.ScheduledChangeLead ahead.
	StartTime string `json:"startTime"`
	// EndTime is when the change window ends (start + 2 h here).
	EndTime string `json:"endTime,omitempty"`
	// LastUpdatedTime is when the event was last updated.
	LastUpdatedTime string `json:"lastUpdatedTime"`
	// StatusCode is "upcoming" for a scheduled change in the future.
	StatusCode string `json:"statusCode"`
	// EventRegion is the affected region.
	EventRegion string `json:"eventRegion"`
	// EventDescription is the human-readable text.
	EventDescription []HealthEventDescription `json:"eventDescription"`
	// AffectedEntities are the affected instances.
	AffectedEntities []HealthAffectedEntity `json:"affectedEntities"`
	// AffectedAccount is the account id.
	AffectedAccount string `json:"affectedAccount"`
}

// HealthEventDescription is one language's description of a Health event.
type HealthEventDescription struct {
	// Language is "en_US".
	Language string `json:"language"`
	// LatestDescription is the text.
	LatestDescription string `json:"latestDescription"`
}

// HealthAffectedEntity is one resource affected by a Health event.
type HealthAffectedEntity struct {
	// EntityValue is the instance id.
	EntityValue string `json:"entityValue"`
}

// eventBridgeSenderID is the SenderId attribute of the messages the
// simulated EventBridge delivers. It is the simulator's own placeholder:
// AWS documents SenderId for IAM users and roles (ReceiveMessage, Amazon
// SQS API Reference) but not its value for deliveries by EventBridge, so
// no client should compare it with anything (karpx does not; see
// docs/interruption.md). Messages sent with SendMessage or SendRawMessage
// carry Config.AccountID instead.
const eventBridgeSenderID = "AIDAEVENTBRIDGESIM"

// eventState holds the event id generator. Guarded by Simulator.mu.
type eventState struct {
	ids *idGen
}

func newEventState(cfg *Config) *eventState {
	return &eventState{ids: newIDGen(cfg.Seed ^ 0xe7e7)}
}

// newEventLocked builds an event with its envelope filled.
func (s *Simulator) newEventLocked(detailType, source string, at time.Time, resources []string, detail any) Event {
	raw, err := json.Marshal(detail)
	if err != nil {
		panic(err) // the detail types always marshal
	}
	return Event{Version: "0", ID: s.events.ids.uuid(""), DetailType: detailType, Source: source,
		Account: s.cfg.AccountID, Time: at.UTC().Format(eventTimeFormat), Region: s.cfg.Region,
		Resources: resources, Detail: raw}
}

func (s *Simulator) instanceARN(id string) string {
	return "arn:aws:ec2:" + s.cfg.Region + ":" + s.cfg.AccountID + ":instance/" + id
}

// publishLocked delivers ev to the interruption queue, if there is one.
// Call with s.mu held.
func (s *Simulator) publishLocked(ev Event, now time.Time) {
	if s.cfg.InterruptionQueue == "" {
		return
	}
	body, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	s.sqs.mu.Lock()
	defer s.sqs.mu.Unlock()
	q := s.sqs.queues[s.cfg.InterruptionQueue]
	if q == nil {
		return
	}
	s.sqs.sendLocked(q, string(body), eventBridgeSenderID, now, 0)
	s.log.V(1).Info("Event sent", "detailType", ev.DetailType, "resources", ev.Resources, "queue", q.name)
}

// stateAt is a state an instance entered and when.
type stateAt struct {
	state string
	at    time.Time
}

// transitions lists the states the instance has entered by now, in order.
// The list only grows with time (a prefix never changes).
func (in *instance) transitions(now time.Time, cfg *Config) []stateAt {
	out := []stateAt{{StatePending, in.launchTime}}
	end := in.endedAt(now)
	running := in.runningSince(cfg)
	if !now.Before(running) && (end.IsZero() || !end.Before(running)) {
		out = append(out, stateAt{StateRunning, running})
	}
	if !end.IsZero() {
		out = append(out, stateAt{StateShuttingDown, end})
		if t := end.Add(cfg.ShuttingDownDelay); !now.Before(t) {
			out = append(out, stateAt{StateTerminated, t})
		}
	}
	return out
}

// publishStateChangesLocked sends an "EC2 Instance State-change
// Notification" for every transition not sent yet, with the transition's
// time. Instance states are derived from timestamps, so transitions are
// noticed when someone looks: Run's reconcile pass (every
// Config.ReconcileInterval), DescribeInstances, ReceiveMessage,
// GetQueueAttributes and the Go and _sim views. Call with s.mu held.
func (s *Simulator) publishStateChangesLocked(now time.Time) {
	if s.cfg.InterruptionQueue == "" {
		return
	}
	for _, id := range s.order {
		in := s.instances[id]
		tr := in.transitions(now, &s.cfg)
		for _, t := range tr[min(in.notified, len(tr)):] {
			s.publishLocked(s.newEventLocked(DetailTypeStateChange, EventSourceEC2, t.at, []string{s.instanceARN(id)},
				StateChangeDetail{InstanceID: id, State: t.state}), now)
		}
		in.notified = max(in.notified, len(tr))
	}
}

// PublishEvent delivers ev to the interruption queue as EventBridge would,
// as it is (no field is checked or filled): with an event Interrupt
// returned, a duplicate delivery (EventBridge delivers at least once);
// with an edited Time or Detail, out-of-order or odd events. It returns
// ErrNoInterruptionQueue when Config.InterruptionQueue is empty.
func (s *Simulator) PublishEvent(ev Event) error {
	if s.cfg.InterruptionQueue == "" {
		return ErrNoInterruptionQueue
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publishLocked(ev, s.clock.Now())
	return nil
}

// syncEvents sends the pending state-change events.
func (s *Simulator) syncEvents() {
	if s.cfg.InterruptionQueue == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publishStateChangesLocked(s.clock.Now())
}
