package hydration

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func TestRegistryReadinessAndWait(t *testing.T) {
	r := NewRegistry()
	r.Require(InstanceTypes, Offerings)
	r.Succeeded(Subnets, 3) // not required
	r.Failed(InstanceTypes, errors.New("503 Unavailable"))
	err := r.Check(nil)
	if err == nil || !strings.Contains(err.Error(), "instance-types not hydrated (last error: 503 Unavailable)") || !strings.Contains(err.Error(), "offerings not hydrated") {
		t.Fatalf("Check = %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Wait(context.Background(), InstanceTypes, Offerings) }()
	r.Succeeded(InstanceTypes, 700)
	select {
	case <-done:
		t.Fatal("Wait returned with offerings missing")
	case <-time.After(50 * time.Millisecond):
	}
	r.Succeeded(Offerings, 2000)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := r.Check(nil); err != nil {
		t.Fatalf("Check after hydration: %v", err)
	}
	// A later failure keeps the data and readiness, and shows the error.
	r.Failed(InstanceTypes, errors.New("throttled"))
	if err := r.Check(nil); err != nil {
		t.Fatalf("Check after a failed refresh: %v", err)
	}
	w := httptest.NewRecorder()
	r.Handler().ServeHTTP(w, httptest.NewRequest("GET", HandlerPath, nil))
	var rep Report
	if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.DataSets) != 3 || rep.DataSets[0].Name != InstanceTypes || rep.DataSets[0].Items != 700 || rep.DataSets[0].LastError != "throttled" || !rep.DataSets[0].Hydrated {
		t.Errorf("report %+v", rep)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Wait(ctx, AMIs); err == nil {
		t.Error("Wait on a cancelled context returned nil")
	}
}

type runnable struct{ started atomic.Bool }

func (r *runnable) Start(context.Context) error { r.started.Store(true); return nil }

func TestAfterWaitsAndHydratorRetries(t *testing.T) {
	r := NewRegistry()
	inner := &runnable{}
	gated := After(r, inner, logr.Discard(), InstanceTypes)
	var calls atomic.Int32
	h := NewHydrator(logr.Discard(), Source{Name: InstanceTypes, Refresh: func(context.Context) error {
		if calls.Add(1) <= 3 {
			err := errors.New("503")
			r.Failed(InstanceTypes, err)
			return err
		}
		r.Succeeded(InstanceTypes, 1)
		return nil
	}})
	h.RetryBase, h.RetryMax = time.Millisecond, 2*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gateDone := make(chan struct{})
	go func() { _ = gated.Start(ctx); close(gateDone) }()
	time.Sleep(20 * time.Millisecond)
	if inner.started.Load() {
		t.Fatal("gated runnable started before hydration")
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-gateDone
	if !inner.started.Load() || calls.Load() != 4 {
		t.Errorf("started=%v after %d refreshes, want true after 4", inner.started.Load(), calls.Load())
	}
	if gated.(interface{ NeedLeaderElection() bool }).NeedLeaderElection() != true {
		t.Error("gated runnable lost its leader election need")
	}
}
