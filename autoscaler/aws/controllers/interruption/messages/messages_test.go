package messages

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// event builds an EventBridge event as AWS documents it.
func event(source, detailType, detail string) string {
	return fmt.Sprintf(`{"version":"0","id":"7bf73129-1428-4cd3-a780-95db273d1602","detail-type":%q,"source":%q,"account":"123456789012","time":"2026-11-24T09:00:00Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1b:instance/i-1234567890abcdef0"],"detail":%s}`,
		detailType, source, detail)
}

func TestParseKinds(t *testing.T) {
	at := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, body string
		kind       Kind
		ids        []string
		reclaim    time.Time
	}{
		{"spot", event(SourceEC2, DetailTypeSpotInterruption, `{"instance-id":"i-1234567890abcdef0","instance-action":"terminate"}`),
			KindSpotInterruption, []string{"i-1234567890abcdef0"}, at.Add(SpotNotice)},
		{"rebalance", event(SourceEC2, DetailTypeRebalance, `{"instance-id":"i-12345678"}`), KindRebalanceRecommendation, []string{"i-12345678"}, time.Time{}},
		{"stopping", event(SourceEC2, DetailTypeStateChange, `{"instance-id":"i-1234567890abcdef0","state":"stopping"}`), KindStopping, []string{"i-1234567890abcdef0"}, at.Add(time.Hour)},
		{"stopped", event(SourceEC2, DetailTypeStateChange, `{"instance-id":"i-1234567890abcdef0","state":"stopped"}`), KindStopping, []string{"i-1234567890abcdef0"}, at.Add(time.Hour)},
		{"shutting-down", event(SourceEC2, DetailTypeStateChange, `{"instance-id":"i-1234567890abcdef0","state":"shutting-down"}`), KindTerminating, []string{"i-1234567890abcdef0"}, at.Add(time.Hour)},
		{"terminated", event(SourceEC2, DetailTypeStateChange, `{"instance-id":"i-1234567890abcdef0","state":"terminated"}`), KindTerminating, []string{"i-1234567890abcdef0"}, at.Add(time.Hour)},
		{"running is a no-op", event(SourceEC2, DetailTypeStateChange, `{"instance-id":"i-1234567890abcdef0","state":"running"}`), KindNoOp, nil, time.Time{}},
		{"scheduled change", event(SourceHealth, DetailTypeHealth, `{"service":"EC2","eventTypeCategory":"scheduledChange","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","startTime":"Tue, 24 Nov 2026 10:00:00 GMT","affectedEntities":[{"entityValue":"i-1234567890abcdef0"},{"entityValue":"i-0123456789abcdef0"}]}`),
			KindScheduledChange, []string{"i-1234567890abcdef0", "i-0123456789abcdef0"}, at.Add(time.Hour)},
		{"health event of another service", event(SourceHealth, DetailTypeHealth, `{"service":"RDS","eventTypeCategory":"scheduledChange","affectedEntities":[]}`), KindNoOp, nil, time.Time{}},
		{"unknown detail-type", event(SourceEC2, "EC2 AMI State Change", `{"ImageId":"ami-1"}`), KindNoOp, nil, time.Time{}},
		{"unknown source", event("aws.s3", "Object Created", `{}`), KindNoOp, nil, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind != tc.kind || fmt.Sprint(m.InstanceIDs) != fmt.Sprint(tc.ids) {
				t.Fatalf("got %s %v, want %s %v", m.Kind, m.InstanceIDs, tc.kind, tc.ids)
			}
			if !m.Time.Equal(at) {
				t.Errorf("time %s, want %s", m.Time, at)
			}
			reclaim, ok := m.ReclaimAt(SpotNotice, at.Add(time.Hour))
			if ok != !tc.reclaim.IsZero() || !reclaim.Equal(tc.reclaim) {
				t.Errorf("ReclaimAt = %s %v, want %s", reclaim, ok, tc.reclaim)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	secret := "AKIASECRETSECRET0000"
	for _, tc := range []struct{ name, body, want string }{
		{"not JSON", "hello " + secret, "not an EventBridge event"},
		{"JSON array", `["` + secret + `"]`, "not an EventBridge event"},
		{"trailing data", event(SourceEC2, DetailTypeRebalance, `{"instance-id":"i-12345678"}`) + `{"x":"` + secret + `"}`, "trailing data"},
		{"no detail", `{"version":"0","id":"x","detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","account":"123456789012","time":"2026-11-24T09:00:00Z","region":"us-east-1"}`, "detail missing"},
		{"no version", strings.Replace(event(SourceEC2, DetailTypeRebalance, `{"instance-id":"i-12345678"}`), `"version":"0",`, "", 1), "version missing"},
		{"bad account", strings.Replace(event(SourceEC2, DetailTypeRebalance, `{"instance-id":"i-12345678"}`), "123456789012", secret, 1), "account"},
		{"bad time", strings.Replace(event(SourceEC2, DetailTypeRebalance, `{"instance-id":"i-12345678"}`), "2026-11-24T09:00:00Z", "yesterday", 1), "time is not RFC 3339"},
		{"bad instance id", event(SourceEC2, DetailTypeSpotInterruption, `{"instance-id":"`+secret+`","instance-action":"terminate"}`), "instance-id"},
		{"instance id of wrong type", event(SourceEC2, DetailTypeSpotInterruption, `{"instance-id":12,"instance-action":"terminate"}`), "wrong type"},
		{"bad spot action", event(SourceEC2, DetailTypeSpotInterruption, `{"instance-id":"i-12345678","instance-action":"`+secret+`"}`), "instance-action"},
		{"bad state", event(SourceEC2, DetailTypeStateChange, `{"instance-id":"i-12345678","state":"`+secret+`"}`), "state must be"},
		{"health without entities", event(SourceHealth, DetailTypeHealth, `{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[]}`), "affectedEntities"},
		{"health with bad start", event(SourceHealth, DetailTypeHealth, `{"service":"EC2","eventTypeCategory":"scheduledChange","startTime":"`+secret+`","affectedEntities":[{"entityValue":"i-12345678"}]}`), "startTime"},
		{"too large", event(SourceEC2, DetailTypeRebalance, `{"instance-id":"i-12345678","pad":"`+strings.Repeat("x", maxBodyBytes)+`"}`), "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.body))
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "xxxxxxxx") {
				t.Errorf("err %q quotes the body", err)
			}
		})
	}
}

// FuzzParse: Parse never panics, errors never quote the body, and every
// accepted message is consistent (actionable kinds carry valid instance
// IDs, no-ops none).
func FuzzParse(f *testing.F) {
	f.Add([]byte(event(SourceEC2, DetailTypeSpotInterruption, `{"instance-id":"i-1234567890abcdef0","instance-action":"terminate"}`)))
	f.Add([]byte(event(SourceEC2, DetailTypeStateChange, `{"instance-id":"i-12345678","state":"terminated"}`)))
	f.Add([]byte(event(SourceHealth, DetailTypeHealth, `{"service":"EC2","eventTypeCategory":"scheduledChange","startTime":"Tue, 24 Nov 2026 10:00:00 GMT","affectedEntities":[{"entityValue":"i-12345678"}]}`)))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := Parse(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			if len(body) >= 16 && strings.Contains(err.Error(), string(body)) {
				t.Fatalf("error quotes the body: %v", err)
			}
			return
		}
		if m.Kind == KindNoOp {
			if len(m.InstanceIDs) != 0 {
				t.Fatalf("no-op with instances %v", m.InstanceIDs)
			}
			return
		}
		if len(m.InstanceIDs) == 0 {
			t.Fatalf("%s without instances", m.Kind)
		}
		for _, id := range m.InstanceIDs {
			if !instanceIDPattern.MatchString(id) {
				t.Fatalf("%s with invalid instance id %q", m.Kind, id)
			}
		}
	})
}
