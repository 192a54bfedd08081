package operator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// A stop hook runs once the manager's context ends, with a context of its
// own bounded by stopHookTimeout, and its error does not fail the manager.
func TestStopHookRunsAfterStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	type call struct {
		managerStopped bool
		deadline       time.Duration
	}
	calls := make(chan call, 1)
	hook := stopHook(logr.Discard(), func(hctx context.Context) error {
		d, ok := hctx.Deadline()
		if !ok {
			t.Error("hook context has no deadline")
		}
		calls <- call{managerStopped: ctx.Err() != nil, deadline: time.Until(d)}
		return errors.New("tags still in flight")
	})
	result := make(chan error, 1)
	go func() { result <- hook.Start(ctx) }()
	cancel()
	c := <-calls
	if !c.managerStopped {
		t.Error("hook ran before the manager's context ended")
	}
	if c.deadline <= 0 || c.deadline > stopHookTimeout {
		t.Errorf("hook deadline %s away, want within (0, %s]", c.deadline, stopHookTimeout)
	}
	if err := <-result; err != nil {
		t.Errorf("Start = %v, want nil: a hook's error must not fail the manager", err)
	}
}
