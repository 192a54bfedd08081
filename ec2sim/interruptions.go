package ec2sim

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Interruptions on demand: Interrupt (Go) and POST /_sim/interrupt send the
// events AWS would send for an instance, and a spot interruption also
// reclaims the instance when its notice is over.

// InterruptionKind names the event Interrupt sends.
type InterruptionKind string

// Interruption kinds.
const (
	// InterruptionSpot sends "EC2 Spot Instance Interruption Warning"
	// (instance-action terminate) per instance and terminates each
	// Config.SpotInterruptionNotice later (state reason
	// Server.SpotInstanceTermination). Spot instances only.
	InterruptionSpot InterruptionKind = "spot-interruption"
	// InterruptionRebalance sends "EC2 Instance Rebalance Recommendation"
	// per instance. Spot instances only (EC2 sends it for spot only). The
	// instance is not changed.
	InterruptionRebalance InterruptionKind = "rebalance-recommendation"
	// InterruptionRetirement sends one AWS Health scheduledChange event
	// AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED listing every instance, start
	// time Config.ScheduledChangeLead ahead. The instances are not changed
	// (the retirement itself is not simulated).
	InterruptionRetirement InterruptionKind = "instance-retirement"
	// InterruptionMaintenance is InterruptionRetirement with
	// AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED.
	InterruptionMaintenance InterruptionKind = "instance-maintenance"
	// InterruptionStopping, InterruptionStopped, InterruptionShuttingDown
	// and InterruptionTerminated send only the "EC2 Instance State-change
	// Notification" of that state per instance, without changing the
	// instance (for duplicate and out-of-order tests; a real terminate
	// sends its own notifications).
	InterruptionStopping     InterruptionKind = "stopping"
	InterruptionStopped      InterruptionKind = "stopped"
	InterruptionShuttingDown InterruptionKind = "shutting-down"
	InterruptionTerminated   InterruptionKind = "terminated"
)

// InterruptionKinds lists every kind Interrupt accepts.
var InterruptionKinds = []InterruptionKind{InterruptionSpot, InterruptionRebalance, InterruptionRetirement,
	InterruptionMaintenance, InterruptionStopping, InterruptionStopped, InterruptionShuttingDown, InterruptionTerminated}

// SpotInterruptionNotice is EC2's notice before a spot instance is
// reclaimed: two minutes ("Spot Instance interruption notices", EC2 User
// Guide). Spot interruption warnings are timed against it.
const SpotInterruptionNotice = 2 * time.Minute

// Health event type codes of the scheduled changes Interrupt sends (AWS
// Health event types for EC2).
const (
	HealthRetirementScheduled  = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
	HealthMaintenanceScheduled = "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED"
)

// DescribeInstances stateReason codes.
const (
	stateReasonUser = "Client.UserInitiatedShutdown"
	stateReasonSpot = "Server.SpotInstanceTermination"
)

func (in *instance) stateReasonCode(now time.Time) string {
	if in.spotReclaimed(now) {
		return stateReasonSpot
	}
	if in.blockReclaimed(now) {
		return stateReasonCapacityBlock
	}
	return stateReasonUser
}

// Errors of Interrupt, for errors.Is.
var (
	// ErrUnknownInstance: an instance id the simulator does not know.
	ErrUnknownInstance = errors.New("unknown instance")
	// ErrNotSpot: a spot-only event for an on-demand instance.
	ErrNotSpot = errors.New("not a spot instance")
	// ErrInstanceEnded: an interruption of an instance already shutting
	// down or terminated.
	ErrInstanceEnded = errors.New("instance already shutting down or terminated")
	// ErrUnknownKind: an InterruptionKind not in InterruptionKinds.
	ErrUnknownKind = errors.New("unknown interruption kind")
)

// Interrupt sends the events of kind for the instances to the interruption
// queue (when Config.InterruptionQueue is set; the events are returned
// either way) and, for InterruptionSpot, schedules each instance's reclaim.
//
// Spot timing: the instance is reclaimed at R = now +
// Config.SpotInterruptionNotice, rounded up to a whole second, and the
// warning's event time is R - 2 minutes, so that, as on EC2, event time +
// 2 minutes is the moment of reclaim even when tests shorten the notice
// (the event then looks sent in the past). At R the instance becomes
// shutting-down (state reason Server.SpotInstanceTermination), its Node is
// deleted like any vanished machine's, the state-change events follow, and
// after Config.ShuttingDownDelay it is terminated. A second warning for an
// instance already warned keeps R.
//
// Nothing is sent unless every id is valid: it returns an error wrapping
// ErrUnknownKind, ErrUnknownInstance, ErrNotSpot (spot interruption and
// rebalance recommendation of an on-demand instance) or ErrInstanceEnded
// (any kind but the state-change ones, for an instance shutting down or
// terminated), or an error when no id is given.
//
// Longer than 80 lines on purpose: one switch over the interruption kinds,
// each case the short list of what EC2 does for that kind, validated as a
// whole under one lock before anything is sent, so that no event of a call
// with a bad id goes out.
func (s *Simulator) Interrupt(kind InterruptionKind, instanceIDs ...string) ([]Event, error) {
	known := false
	for _, k := range InterruptionKinds {
		known = known || k == kind
	}
	if !known {
		return nil, fmt.Errorf("ec2sim: %w %q: use one of %v", ErrUnknownKind, kind, InterruptionKinds)
	}
	if len(instanceIDs) == 0 {
		return nil, fmt.Errorf("ec2sim: interrupt %s: no instance ids given", kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.gcLocked(now) // earlier transitions are sent first
	stateOnly := kind == InterruptionStopping || kind == InterruptionStopped || kind == InterruptionShuttingDown || kind == InterruptionTerminated
	for _, id := range instanceIDs {
		in := s.instances[id]
		switch {
		case in == nil:
			return nil, fmt.Errorf("ec2sim: interrupt %s: %w %s", kind, ErrUnknownInstance, id)
		case (kind == InterruptionSpot || kind == InterruptionRebalance) && in.capacityType != capacitySpot:
			return nil, fmt.Errorf("ec2sim: interrupt %s: instance %s is %s: %w (EC2 sends %s only for spot instances)", kind, id, in.capacityType, ErrNotSpot, kind)
		case !stateOnly && !in.endedAt(now).IsZero():
			return nil, fmt.Errorf("ec2sim: interrupt %s: instance %s: %w", kind, id, ErrInstanceEnded)
		}
	}
	var events []Event
	switch {
	case kind == InterruptionSpot:
		for _, id := range instanceIDs {
			in := s.instances[id]
			if in.reclaimAt.IsZero() {
				r := now.Add(s.cfg.SpotInterruptionNotice)
				if t := r.Truncate(time.Second); t.Before(r) {
					r = t.Add(time.Second)
				}
				in.reclaimAt = r
			}
			events = append(events, s.newEventLocked(DetailTypeSpotInterruption, EventSourceEC2, in.reclaimAt.Add(-SpotInterruptionNotice),
				[]string{s.instanceARN(id)}, SpotInterruptionDetail{InstanceID: id, InstanceAction: "terminate"}))
			s.log.Info("Spot interruption", "instanceID", id, "reclaimAt", in.reclaimAt)
		}
	case kind == InterruptionRebalance:
		for _, id := range instanceIDs {
			events = append(events, s.newEventLocked(DetailTypeRebalanceRecommendation, EventSourceEC2, now,
				[]string{s.instanceARN(id)}, RebalanceRecommendationDetail{InstanceID: id}))
		}
	case stateOnly:
		for _, id := range instanceIDs {
			events = append(events, s.newEventLocked(DetailTypeStateChange, EventSourceEC2, now,
				[]string{s.instanceARN(id)}, StateChangeDetail{InstanceID: id, State: string(kind)}))
		}
	default: // scheduled changes
		code := HealthRetirementScheduled
		text := "EC2 has detected degradation of the underlying hardware hosting your Amazon EC2 instance. Due to this degradation your instance could already be unreachable. Your instance will be retired after the scheduled start time."
		if kind == InterruptionMaintenance {
			code = HealthMaintenanceScheduled
			text = "EC2 will undertake maintenance on the hardware hosting your instance. Your instance will be rebooted during the scheduled window."
		}
		start := now.Add(s.cfg.ScheduledChangeLead).UTC()
		id := s.events.ids.next("")
		detail := HealthDetail{
			EventARN: "arn:aws:health:" + s.cfg.Region + "::event/EC2/" + code + "/" + code + "_" + id[1:9] + "-" + id[9:15],
			Service:  "EC2", EventTypeCode: code, EventTypeCategory: "scheduledChange", EventScopeCode: "ACCOUNT_SPECIFIC",
			CommunicationID: id[1:], StartTime: start.Format(healthTimeFormat), EndTime: start.Add(2 * time.Hour).Format(healthTimeFormat),
			LastUpdatedTime: now.UTC().Format(healthTimeFormat), StatusCode: "upcoming", EventRegion: s.cfg.Region,
			EventDescription: []HealthEventDescription{{Language: "en_US", LatestDescription: text}},
			AffectedAccount:  s.cfg.AccountID,
		}
		evCode := eventCodeInstanceRetirement
		if kind == InterruptionMaintenance {
			evCode = eventCodeInstanceReboot
		}
		for _, iid := range instanceIDs {
			detail.AffectedEntities = append(detail.AffectedEntities, HealthAffectedEntity{EntityValue: iid})
			in := s.instances[iid]
			in.scheduledEvents = append(in.scheduledEvents, scheduledEvent{id: "instance-event-" + s.ids.next("")[1:], code: evCode,
				description: text, notBefore: start, notAfter: start.Add(2 * time.Hour)})
		}
		events = append(events, s.newEventLocked(DetailTypeHealth, EventSourceHealth, now, append([]string{}, instanceIDs...), detail))
	}
	for _, ev := range events {
		s.publishLocked(ev, now)
	}
	return events, nil
}

// Admin endpoints of the queues and interruptions (JSON unless noted):
//
//	GET  /_sim/sqs                        [QueueStats...], by name
//	GET  /_sim/sqs/{queue}                QueueStats
//	GET  /_sim/sqs/{queue}/messages       [QueueMessage...], undeleted, send order
//	POST /_sim/sqs/{queue}/messages       request body (raw, any bytes) is the message body → {"messageId": "..."}
//	POST /_sim/sqs/{queue}/redeliver      ends every visibility timeout now → {"redelivered": n}
//	POST /_sim/interrupt                  {"kind": InterruptionKind, "instanceIds": [...]} → {"events": [Event...]}
func (s *Simulator) registerSQSAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /_sim/sqs", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Queues())
	})
	mux.HandleFunc("GET /_sim/sqs/{queue}", func(w http.ResponseWriter, r *http.Request) {
		st, err := s.QueueStats(r.PathValue("queue"))
		writeFound(w, st, err)
	})
	mux.HandleFunc("GET /_sim/sqs/{queue}/messages", func(w http.ResponseWriter, r *http.Request) {
		msgs, err := s.QueueMessages(r.PathValue("queue"))
		writeFound(w, msgs, err)
	})
	mux.HandleFunc("POST /_sim/sqs/{queue}/messages", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, SQSMaxMessageSize+1))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		queue := r.PathValue("queue")
		s.sqs.mu.Lock()
		_, qerr := s.queue(queue)
		s.sqs.mu.Unlock()
		if qerr != nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": qerr.Error()})
			return
		}
		id, err := s.SendMessage(queue, string(body))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"messageId": id})
	})
	mux.HandleFunc("POST /_sim/sqs/{queue}/redeliver", func(w http.ResponseWriter, r *http.Request) {
		n, err := s.RedeliverInFlight(r.PathValue("queue"))
		writeFound(w, map[string]int{"redelivered": n}, err)
	})
	mux.HandleFunc("POST /_sim/interrupt", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Kind        InterruptionKind `json:"kind"`
			InstanceIDs []string         `json:"instanceIds"`
		}
		if !readJSON(w, r, &in) {
			return
		}
		events, err := s.Interrupt(in.Kind, in.InstanceIDs...)
		if err != nil {
			status := http.StatusBadRequest
			if errors.Is(err, ErrUnknownInstance) {
				status = http.StatusNotFound
			}
			writeJSON(w, status, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string][]Event{"events": events})
	})
}
