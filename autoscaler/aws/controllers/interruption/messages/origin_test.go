package messages

import (
	"errors"
	"strings"
	"testing"
)

// TestOriginCheck: a message is accepted only with the queue owner's
// account and the controller's region; each other account or region is
// rejected naming its field and reason, without quoting the message's
// value. Control: the same event with both right is accepted.
func TestOriginCheck(t *testing.T) {
	origin := Origin{Account: "123456789012", Region: "us-east-1"}
	spot := event(SourceEC2, DetailTypeSpotInterruption, `{"instance-id":"i-1234567890abcdef0","instance-action":"terminate"}`)
	for _, tc := range []struct {
		name, body    string
		origin        Origin
		field, reason string
	}{
		{"control: this account and region", spot, origin, "", ""},
		{"control: a no-op of this account", event("aws.s3", "Object Created", `{}`), origin, "", ""},
		{"other account", strings.Replace(spot, `"account":"123456789012"`, `"account":"999988887777"`, 1), origin, "account", RejectAccount},
		{"other region", strings.Replace(spot, `"region":"us-east-1"`, `"region":"eu-west-1"`, 1), origin, "region", RejectRegion},
		{"both: account first", strings.Replace(strings.Replace(spot, `"region":"us-east-1"`, `"region":"eu-west-1"`, 1), `"account":"123456789012"`, `"account":"999988887777"`, 1), origin, "account", RejectAccount},
		{"a no-op of another account", strings.Replace(event("aws.s3", "Object Created", `{}`), `"account":"123456789012"`, `"account":"999988887777"`, 1), origin, "account", RejectAccount},
		{"unknown owner account rejects", spot, Origin{Region: "us-east-1"}, "account", RejectAccount},
		{"unknown region rejects", spot, Origin{Account: "123456789012"}, "region", RejectRegion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			err = tc.origin.Check(m)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			var rej *RejectedError
			if !errors.As(err, &rej) || !errors.Is(err, ErrRejected) {
				t.Fatalf("err = %v, want a *RejectedError wrapping ErrRejected", err)
			}
			if rej.Field != tc.field || rej.Reason != tc.reason {
				t.Errorf("field %q reason %q, want %q %q", rej.Field, rej.Reason, tc.field, tc.reason)
			}
			if !strings.Contains(err.Error(), "field "+tc.field) {
				t.Errorf("err %q does not name field %s", err, tc.field)
			}
			if strings.Contains(err.Error(), "999988887777") || strings.Contains(err.Error(), "eu-west-1") {
				t.Errorf("err %q quotes the message's value", err)
			}
		})
	}
}

// TestParseKeepsAccountAndRegion: Parse returns the envelope's account and
// region, which Check compares.
func TestParseKeepsAccountAndRegion(t *testing.T) {
	m, err := Parse([]byte(event(SourceEC2, DetailTypeRebalance, `{"instance-id":"i-12345678"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if m.Account != "123456789012" || m.Region != "us-east-1" {
		t.Fatalf("account %q region %q, want 123456789012 us-east-1", m.Account, m.Region)
	}
}
