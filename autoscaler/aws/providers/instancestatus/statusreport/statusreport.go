// Package statusreport holds the types of the EC2 instance status checks
// that the controller serves and `kubectl karpx status` reads: the
// failed details of an instance (HealthStatus, Detail, Category) and the
// controller's last poll (Report, at HandlerPath). It imports nothing of
// the AWS SDK or controller-runtime, so the plugin links it alone.
package statusreport

import (
	"slices"
	"time"
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
