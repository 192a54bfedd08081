package cloudprovider_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

func TestPriorityOrderAndNames(t *testing.T) {
	crit, norm, spec := cloudprovider.PriorityCritical, cloudprovider.PriorityNormal, cloudprovider.PrioritySpeculative
	if !crit.Outranks(norm) || !norm.Outranks(spec) || !crit.Outranks(spec) || norm.Outranks(crit) || spec.Outranks(norm) || norm.Outranks(norm) {
		t.Error("want critical before normal before speculative, and no priority before itself")
	}
	for p, want := range map[cloudprovider.Priority]int{crit: 0, norm: 1, spec: 2, cloudprovider.Priority(7): 1} {
		if p.Rank() != want || p.Rank() >= cloudprovider.NumPriorities {
			t.Errorf("%v.Rank() = %d, want %d (below NumPriorities %d)", p, p.Rank(), want, cloudprovider.NumPriorities)
		}
	}
	out, err := json.Marshal(map[string]cloudprovider.Priority{"a": crit, "b": norm, "c": spec})
	if err != nil || string(out) != `{"a":"critical","b":"normal","c":"speculative"}` {
		t.Errorf("json = %s, %v", out, err)
	}
	if s := cloudprovider.Priority(7).String(); s != "Priority(7)" {
		t.Errorf("unknown priority prints %q", s)
	}
}

func TestPriorityTravelsOnTheContext(t *testing.T) {
	ctx := context.Background()
	if p := cloudprovider.PriorityFrom(ctx); p != cloudprovider.PriorityNormal {
		t.Errorf("unmarked context: %v, want normal", p)
	}
	marked := cloudprovider.WithPriority(ctx, cloudprovider.PrioritySpeculative)
	if p := cloudprovider.PriorityFrom(marked); p != cloudprovider.PrioritySpeculative {
		t.Errorf("marked context: %v, want speculative", p)
	}
	if p := cloudprovider.PriorityFrom(cloudprovider.WithPriority(marked, cloudprovider.PriorityCritical)); p != cloudprovider.PriorityCritical {
		t.Errorf("re-marked context: %v, want critical", p)
	}
}
