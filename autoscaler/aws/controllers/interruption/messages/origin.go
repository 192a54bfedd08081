package messages

import (
	"errors"
	"fmt"
)

// Origin is where this cluster's interruption events come from: the AWS
// account that owns the interruption queue and the region the controller
// runs in. The rules of docs/interruption.md sit on the default event bus
// of the queue owner's account in the cluster's region, where AWS emits
// only that account's and region's EC2 and Health events; a message naming
// another account or region did not come from them: someone who may send
// to the queue wrote it, or another account's bus forwarded it.
type Origin struct {
	// Account is the 12-digit account id of the queue's owner, the first
	// path segment of the queue URL (sqs.OwnerAccount).
	Account string
	// Region is the controller's AWS region (--region), e.g. "us-east-1".
	Region string
}

// Reasons a message is rejected, the reason label of
// karpx_interruption_rejected_messages_total.
const (
	// RejectAccount: the envelope's account is not the queue owner's.
	RejectAccount = "account_mismatch"
	// RejectRegion: the envelope's region is not the controller's.
	RejectRegion = "region_mismatch"
)

// ErrRejected wraps every error of Origin.Check.
var ErrRejected = errors.New("interruption message rejected")

// RejectedError says which envelope field of a message did not match its
// Origin. It never quotes the message's value: a forged message may carry
// anything.
type RejectedError struct {
	// Field is the envelope field: "account" or "region".
	Field string
	// Reason is RejectAccount or RejectRegion.
	Reason string
	// Want is the Origin's value the field had to equal.
	Want string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("%s: envelope field %s is not %s (this cluster's); EventBridge delivers only events of the rule's own account and region, so another sender wrote it",
		ErrRejected, e.Field, e.Want)
}

// Unwrap makes errors.Is(err, ErrRejected) true.
func (e *RejectedError) Unwrap() error { return ErrRejected }

// Check returns nil when m's account and region are o's, else a
// *RejectedError naming the first field that differs (account before
// region). An empty o.Account or o.Region is a programming error and
// rejects every message (field "account" or "region"): a check that cannot
// be made is not passed.
func (o Origin) Check(m Message) error {
	if o.Account == "" || m.Account != o.Account {
		return &RejectedError{Field: "account", Reason: RejectAccount, Want: orUnknown(o.Account)}
	}
	if o.Region == "" || m.Region != o.Region {
		return &RejectedError{Field: "region", Reason: RejectRegion, Want: orUnknown(o.Region)}
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}
