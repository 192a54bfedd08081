package table

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// None is printed, as kubectl does, for a field that has no value.
const None = "<none>"

// OrNone returns s, or None when s is empty.
func OrNone(s string) string {
	if s == "" {
		return None
	}
	return s
}

// Dash returns s, or "-" when s is empty (a field that does not apply).
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// OneLine keeps a cell on one line: newlines become spaces.
func OneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// Since is the time from since to now as kubectl get prints ages (5s, 3m2s,
// 4h, 12d; <invalid> for a since well after now), or <unknown> when since
// is zero.
func Since(since, now time.Time) string {
	if since.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(since))
}
