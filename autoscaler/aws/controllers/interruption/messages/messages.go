package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Kind is what a Message asks for. The values are Karpenter's (the
// message_type label of karpenter_interruption_received_messages_total).
type Kind string

// Kinds of messages.
const (
	// KindSpotInterruption is an EC2 Spot Instance Interruption Warning:
	// EC2 reclaims the instance two minutes after the event's time.
	KindSpotInterruption Kind = "spot_interrupted"
	// KindRebalanceRecommendation is an EC2 Instance Rebalance
	// Recommendation: the instance is at elevated risk of interruption.
	KindRebalanceRecommendation Kind = "rebalance_recommendation"
	// KindScheduledChange is an AWS Health scheduledChange event for EC2
	// (instance retirement, system maintenance) at StartTime.
	KindScheduledChange Kind = "scheduled_change"
	// KindStopping is an EC2 Instance State-change Notification to
	// stopping or stopped.
	KindStopping Kind = "instance_stopped"
	// KindTerminating is an EC2 Instance State-change Notification to
	// shutting-down or terminated.
	KindTerminating Kind = "instance_terminated"
	// KindNoOp is a well-formed event karpx has nothing to do for (another
	// detail-type, a state change to pending or running, a Health event of
	// another service or category).
	KindNoOp Kind = "no_op"
)

// Event sources and detail-types, as AWS spells them.
const (
	SourceEC2                   = "aws.ec2"
	SourceHealth                = "aws.health"
	DetailTypeSpotInterruption  = "EC2 Spot Instance Interruption Warning"
	DetailTypeRebalance         = "EC2 Instance Rebalance Recommendation"
	DetailTypeStateChange       = "EC2 Instance State-change Notification"
	DetailTypeHealth            = "AWS Health Event"
	healthServiceEC2            = "EC2"
	healthCategoryScheduled     = "scheduledChange"
	maxBodyBytes                = 256 * 1024 // SQS's maximum message size (Amazon SQS Developer Guide, quotas)
	maxAffectedEntitiesAccepted = 1000
)

// Message is one parsed event.
type Message struct {
	// Kind is what the event asks for.
	Kind Kind
	// ID is the EventBridge event id.
	ID string
	// DetailType and Source are the envelope's.
	DetailType, Source string
	// Account is the envelope's account: the 12-digit AWS account the
	// event is about. Origin.Check compares it with the queue's owner.
	Account string
	// Region is the envelope's region, e.g. "us-east-1". Origin.Check
	// compares it with the controller's region.
	Region string
	// Time is the envelope's time: when the event was emitted.
	Time time.Time
	// InstanceIDs are the EC2 instances concerned ("i-" and 8 or 17 hex
	// digits); empty for KindNoOp.
	InstanceIDs []string
	// State is the instance state of a state-change notification.
	State string
	// Action is the spot instance-action (terminate, stop, hibernate).
	Action string
	// StartTime is when a scheduled change starts (zero when not given).
	StartTime time.Time
	// EventTypeCode is the AWS Health event type, e.g.
	// AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED.
	EventTypeCode string
}

// SpotNotice is how long after a Spot Instance Interruption Warning EC2
// interrupts the instance: two minutes (Amazon EC2 User Guide, "Spot
// Instance interruption notices").
const SpotNotice = 2 * time.Minute

// envelope is an EventBridge event ("Amazon EventBridge events", Amazon
// EventBridge User Guide).
type envelope struct {
	Version    *string         `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

type ec2Detail struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action"`
	State          string `json:"state"`
}

type healthDetail struct {
	Service           string `json:"service"`
	EventTypeCategory string `json:"eventTypeCategory"`
	EventTypeCode     string `json:"eventTypeCode"`
	StartTime         string `json:"startTime"`
	AffectedEntities  []struct {
		EntityValue string `json:"entityValue"`
	} `json:"affectedEntities"`
}

var (
	instanceIDPattern = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)
	accountPattern    = regexp.MustCompile(`^[0-9]{12}$`)
	regionPattern     = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
)

// ErrMalformed wraps every error of Parse.
var ErrMalformed = errors.New("malformed interruption message")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Parse parses one SQS message body. It returns an error wrapping
// ErrMalformed (never quoting the body) when the body is not a complete
// EventBridge event or a known detail-type's detail lacks a documented
// field or has an invalid instance ID, time or state; a valid event karpx
// does not act on is KindNoOp.
func Parse(body []byte) (Message, error) {
	if len(body) > maxBodyBytes {
		return Message{}, malformed("body of %d bytes is larger than SQS's %d-byte maximum", len(body), maxBodyBytes)
	}
	var env envelope
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&env); err != nil {
		return Message{}, malformed("not an EventBridge event: %s", jsonError(err))
	}
	if dec.More() {
		return Message{}, malformed("trailing data after the event")
	}
	switch {
	case env.Version == nil:
		return Message{}, malformed("envelope field version missing")
	case env.ID == "":
		return Message{}, malformed("envelope field id missing")
	case env.DetailType == "":
		return Message{}, malformed("envelope field detail-type missing")
	case env.Source == "":
		return Message{}, malformed("envelope field source missing")
	case !accountPattern.MatchString(env.Account):
		return Message{}, malformed("envelope field account is not a 12-digit AWS account id")
	case !regionPattern.MatchString(env.Region):
		return Message{}, malformed("envelope field region is not an AWS region name")
	case len(env.Detail) == 0 || env.Detail[0] != '{':
		return Message{}, malformed("envelope field detail missing or not an object")
	}
	t, err := time.Parse(time.RFC3339, env.Time)
	if err != nil {
		return Message{}, malformed("envelope field time is not RFC 3339")
	}
	m := Message{Kind: KindNoOp, ID: env.ID, DetailType: env.DetailType, Source: env.Source, Account: env.Account, Region: env.Region, Time: t}
	switch {
	case env.Source == SourceEC2 && (env.DetailType == DetailTypeSpotInterruption || env.DetailType == DetailTypeRebalance || env.DetailType == DetailTypeStateChange):
		return parseEC2(m, env.Detail)
	case env.Source == SourceHealth && env.DetailType == DetailTypeHealth:
		return parseHealth(m, env.Detail)
	}
	return m, nil
}

func parseEC2(m Message, raw json.RawMessage) (Message, error) {
	var d ec2Detail
	if err := json.Unmarshal(raw, &d); err != nil {
		return Message{}, malformed("%s detail: %s", m.DetailType, jsonError(err))
	}
	if !instanceIDPattern.MatchString(d.InstanceID) {
		return Message{}, malformed("%s detail: instance-id missing or not an EC2 instance id (i- and 8 or 17 hex digits)", m.DetailType)
	}
	m.InstanceIDs = []string{d.InstanceID}
	switch m.DetailType {
	case DetailTypeSpotInterruption:
		switch d.InstanceAction {
		case "terminate", "stop", "hibernate":
		default:
			return Message{}, malformed("%s detail: instance-action must be terminate, stop or hibernate", m.DetailType)
		}
		m.Kind, m.Action = KindSpotInterruption, d.InstanceAction
	case DetailTypeRebalance:
		m.Kind = KindRebalanceRecommendation
	case DetailTypeStateChange:
		m.State = d.State
		switch d.State {
		case "stopping", "stopped":
			m.Kind = KindStopping
		case "shutting-down", "terminated":
			m.Kind = KindTerminating
		case "pending", "running":
			m.Kind, m.InstanceIDs = KindNoOp, nil
		default:
			return Message{}, malformed("%s detail: state must be one of pending, running, stopping, stopped, shutting-down, terminated", m.DetailType)
		}
	}
	return m, nil
}

func parseHealth(m Message, raw json.RawMessage) (Message, error) {
	var d healthDetail
	if err := json.Unmarshal(raw, &d); err != nil {
		return Message{}, malformed("%s detail: %s", m.DetailType, jsonError(err))
	}
	if d.Service == "" || d.EventTypeCategory == "" {
		return Message{}, malformed("%s detail: service and eventTypeCategory are required", m.DetailType)
	}
	if d.Service != healthServiceEC2 || d.EventTypeCategory != healthCategoryScheduled {
		return m, nil
	}
	if len(d.AffectedEntities) == 0 || len(d.AffectedEntities) > maxAffectedEntitiesAccepted {
		return Message{}, malformed("%s detail: affectedEntities must list 1 to %d instances", m.DetailType, maxAffectedEntitiesAccepted)
	}
	for i, e := range d.AffectedEntities {
		if !instanceIDPattern.MatchString(e.EntityValue) {
			return Message{}, malformed("%s detail: affectedEntities[%d].entityValue is not an EC2 instance id", m.DetailType, i)
		}
		m.InstanceIDs = append(m.InstanceIDs, e.EntityValue)
	}
	if d.StartTime != "" {
		st, err := parseHealthTime(d.StartTime)
		if err != nil {
			return Message{}, malformed("%s detail: startTime is neither RFC 1123 nor RFC 3339", m.DetailType)
		}
		m.StartTime = st
	}
	m.Kind, m.EventTypeCode = KindScheduledChange, d.EventTypeCode
	return m, nil
}

// parseHealthTime reads AWS Health's times: RFC 1123 with a zone name
// ("Wed, 31 Jan 2024 04:00:00 GMT") in its EventBridge events, RFC 3339
// elsewhere.
func parseHealthTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC1123, s); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339, s)
}

// jsonError describes a JSON error without the offending value: a
// *json.UnmarshalTypeError names the field and the types only.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %q has the wrong type (%s, want %s)", te.Field, te.Value, te.Type)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	return "invalid JSON"
}

// ReclaimAt returns when the instance is expected to be gone, for the
// kinds that have such a time: the spot warning's time plus notice (pass
// SpotNotice outside tests), a scheduled change's start (or the event
// time when it has none), now for stopping and terminating. ok is false
// for the other kinds.
func (m Message) ReclaimAt(notice time.Duration, now time.Time) (t time.Time, ok bool) {
	switch m.Kind {
	case KindSpotInterruption:
		return m.Time.Add(notice), true
	case KindScheduledChange:
		if m.StartTime.IsZero() {
			return m.Time, true
		}
		return m.StartTime, true
	case KindStopping, KindTerminating:
		return now, true
	}
	return time.Time{}, false
}
