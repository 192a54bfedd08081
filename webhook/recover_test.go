package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// panickingTaints is a TaintProvider that panics, as a bug would.
type panickingTaints struct{}

func (panickingTaints) ActiveTaints(context.Context) ([]ActiveTaint, error) {
	panic("a bug in the taint provider")
}

// A panic in a validating handler denies that request with a message that
// says why, counts it and leaves the handler serving the next request.
func TestValidatingHandlerPanicDenies(t *testing.T) {
	calls := 0
	h := &objectHandler[ec2NodeClassUserData]{name: HandlerValidateEC2NodeClass, admit: func(ctx context.Context, req *objectRequest[ec2NodeClassUserData]) admission.Response {
		if calls++; calls == 1 {
			var fs []int
			_ = fs[3] // index out of range
		}
		return (&Validator{}).admitEC2NodeClass(ctx, req)
	}}
	before := testutil.ToFloat64(panicsTotal.WithLabelValues(HandlerValidateEC2NodeClass))
	serve := func() admissionv1.AdmissionReview {
		body := reviewJSON("admission.k8s.io/v1", "u1", "CREATE", string(ec2NodeClassJSON("#!/bin/bash\necho hello\n")))
		req := httptest.NewRequest(http.MethodPost, ValidateEC2NodeClassPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("answer is not an AdmissionReview: %v: %s", err, rec.Body.String())
		}
		return out
	}
	out := serve()
	if out.Response == nil || out.Response.Allowed || out.Response.UID != "u1" {
		t.Fatalf("after a panic: got %+v, want a denial of request u1", out.Response)
	}
	if msg := out.Response.Result.Message; !strings.Contains(msg, "validate-ec2nodeclass handler failed") || !strings.Contains(msg, "not checked") {
		t.Errorf("denial %q does not say what happened", msg)
	}
	if got := testutil.ToFloat64(panicsTotal.WithLabelValues(HandlerValidateEC2NodeClass)) - before; got != 1 {
		t.Errorf("karpx_webhook_panics_total grew by %v, want 1", got)
	}
	// Control: the same handler answers the next request as usual.
	if out := serve(); out.Response == nil || !out.Response.Allowed {
		t.Fatalf("request after the panic: got %+v, want it admitted", out.Response)
	}
}

// A panic in the mutating handler admits the NodePool unchanged with a
// warning, and is counted.
func TestMutatingHandlerPanicAdmitsUnchanged(t *testing.T) {
	before := testutil.ToFloat64(panicsTotal.WithLabelValues(HandlerMutateNodePool))
	h := &recoveringHandler{name: HandlerMutateNodePool, h: &NodePoolDefaulter{Taints: panickingTaints{}}}
	resp := h.Handle(context.Background(), request(admissionv1.Create, nodePoolJSON("", `{"nodeClassRef":{"name":"x"}}`), nil, false))
	if !resp.Allowed || len(resp.Patches) != 0 || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "internal error") {
		t.Fatalf("after a panic: got %+v, want admitted unchanged with one warning", resp)
	}
	if len(resp.Warnings[0]) > 120 {
		t.Errorf("warning is %d bytes, over 120", len(resp.Warnings[0]))
	}
	if got := testutil.ToFloat64(panicsTotal.WithLabelValues(HandlerMutateNodePool)) - before; got != 1 {
		t.Errorf("karpx_webhook_panics_total grew by %v, want 1", got)
	}
	// Control: a provider that works gets its taints added through the wrapper.
	h.h = &NodePoolDefaulter{Taints: ciliumAndEBS}
	if resp := h.Handle(context.Background(), request(admissionv1.Create, nodePoolJSON("", `{"nodeClassRef":{"name":"x"}}`), nil, false)); !resp.Allowed || len(resp.Patches) == 0 {
		t.Fatalf("control: got %+v, want a patch", resp)
	}
}
