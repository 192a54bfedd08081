package webhook

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Values of the handler label of karpx_webhook_panics_total: the
// handlers' names, as registered by Register.
const (
	// HandlerMutateNodePool is the mutating NodePool handler.
	HandlerMutateNodePool = "mutate-nodepool"
	// HandlerValidateNodePool is the validating NodePool handler.
	HandlerValidateNodePool = "validate-nodepool"
	// HandlerValidateEC2NodeClass is the validating EC2NodeClass handler.
	HandlerValidateEC2NodeClass = "validate-ec2nodeclass"
	// HandlerValidateNodeOverlay is the validating NodeOverlay handler.
	HandlerValidateNodeOverlay = "validate-nodeoverlay"
)

// panicsTotal counts the panics the handlers recovered from, by handler.
var panicsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "karpx_webhook_panics_total",
	Help: "Panics the karpx webhook's handlers recovered from, by handler (mutate-nodepool, validate-nodepool, validate-ec2nodeclass, validate-nodeoverlay); a validating handler's panic denies the request, the mutating handler's admits it unchanged.",
}, []string{"handler"})

func init() {
	metrics.Registry.MustRegister(panicsTotal)
}

// answerRecovering returns admit's answer; if admit panics, it logs the
// panic with its stack as an error, counts it in
// karpx_webhook_panics_total{handler}, and returns onPanic's answer
// instead, so that one request cannot take the process down (what a
// handler's panic would do to a goroutine net/http does not run it on)
// or be answered with a bare HTTP 500. A fatal runtime error such as a
// stack overflow cannot be recovered; package lint's bounds prevent those.
func answerRecovering(ctx context.Context, handler string, admit func() admission.Response, onPanic func() admission.Response) (resp admission.Response) {
	defer func() {
		if v := recover(); v != nil {
			panicsTotal.WithLabelValues(handler).Inc()
			logf.FromContext(ctx).WithName("webhook").Error(fmt.Errorf("panic: %v", v), "admission handler panicked; answered without it",
				"handler", handler, "stack", string(debug.Stack()))
			resp = onPanic()
		}
	}()
	return admit()
}

// panicDenial is a validating handler's answer after a panic: the request
// is refused (fail closed, as the EC2NodeClass webhook's failurePolicy
// is), with a message that says so and what to do.
func panicDenial(handler string) admission.Response {
	return admission.Denied(fmt.Sprintf("denied by karpx: the %s handler failed on this object (an internal error, logged and counted in karpx_webhook_panics_total), so it was not checked and is refused rather than admitted unchecked; retry, and report the error with the object if it persists", handler))
}

// recoveringHandler runs a mutating admission.Handler with answerRecovering:
// after a panic the object is admitted unchanged with a warning (fail
// open, as the mutating webhook's failurePolicy Ignore would after an
// error).
type recoveringHandler struct {
	name string
	h    admission.Handler
}

// Handle implements admission.Handler.
func (r *recoveringHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	return answerRecovering(ctx, r.name, func() admission.Response { return r.h.Handle(ctx, req) }, func() admission.Response {
		return admission.Allowed("").WithWarnings("karpx: startup taints not checked: internal error in the " + r.name + " handler (logged)")
	})
}
