package ec2sim

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/karpx/karpx/catalog/awsquota"
)

// renderActionTable renders table as its comment table in actions.go.
func renderActionTable(table []actionSpec) []string {
	hooks := func(h faultHook) string {
		var s []string
		for _, x := range []struct {
			bit  faultHook
			name string
		}{{hookError, "error"}, {hookLatency, "latency"}, {hookCapacity, "capacity"}, {hookStatus, "status"}} {
			if h&x.bit != 0 {
				s = append(s, x.name)
			}
		}
		return strings.Join(s, ",")
	}
	row := func(a, b, c, d, e string) string {
		return strings.TrimRight(fmt.Sprintf("//\t%-30s %-8s %-20s %-11s %s", a, b, c, d, e), " ")
	}
	out := []string{row("Action", "Service", "Bucket", "Unfiltered", "Faults")}
	for _, a := range table {
		unf := "-"
		if a.charge().Unfiltered {
			unf = "yes"
		}
		out = append(out, row(a.name, string(a.service), string(a.charge().Category), unf, hooks(a.hooks)))
	}
	return out
}

// TestActionTableIsDocumented keeps the table in actions.go's comment in
// step with actionTable.
func TestActionTableIsDocumented(t *testing.T) {
	src, err := os.ReadFile("actions.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range [][]actionSpec{actionTable, unbucketedTable} {
		want := strings.Join(renderActionTable(table), "\n")
		if !strings.Contains(string(src), want) {
			t.Fatalf("actions.go does not contain the current table:\n%s", want)
		}
	}
	for _, a := range unbucketedTable {
		if a.handle == nil || (a.service != serviceIAM && a.service != serviceEKS && a.service != servicePricing) {
			t.Errorf("%s: incomplete entry", a.name)
		}
		if c, ok := awsquota.ChargeOf(a.name); !ok || !awsquota.Unthrottled(c.Category) {
			t.Errorf("%s: awsquota charges it to %+v (listed: %v), want a category without a published rate", a.name, c, ok)
		}
	}
	for _, a := range actionTable {
		if a.handle == nil || (a.service != serviceEC2 && a.service != serviceSSM && a.service != serviceSQS) {
			t.Errorf("%s: incomplete entry", a.name)
		}
		if _, ok := awsquota.ChargeOf(a.name); !ok {
			t.Errorf("%s: awsquota does not list it", a.name)
		}
		if _, ok := DefaultThrottleConfig().Categories[a.charge().Category]; !ok {
			t.Errorf("%s: category %q has no default bucket", a.name, a.charge().Category)
		}
	}
}

func TestStartServesUntilContextDone(t *testing.T) {
	sim, err := New(Config{ReconcileInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	endpoint, err := sim.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") {
		t.Fatalf("endpoint %q", endpoint)
	}
	if code, body := httpDo(t, http.MethodGet, endpoint+"/_sim/healthz", ""); code != 200 || string(body) != "ok\n" {
		t.Fatalf("healthz %d %q", code, body)
	}
	cancel()
	select {
	case <-sim.Stopped():
	case <-time.After(10 * time.Second):
		t.Fatal("Stopped not closed after cancel")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(endpoint + "/_sim/healthz")
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("server still up after cancel")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := New(Config{Region: "us-east-1", Zones: []string{"eu-west-1a"}}); err == nil {
		t.Fatal("zone outside region accepted")
	}
}
