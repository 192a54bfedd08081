package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	apisv1 "github.com/karpx/karpx/apis/v1"
	kxlint "github.com/karpx/karpx/lint"
)

// DefaultLookupTimeout bounds the EC2NodeClass lookup of a NodePool
// validation, so that a cold cache cannot eat the API server's webhook
// timeout (timeoutSeconds ≤ 3 in the manifests).
const DefaultLookupTimeout = 500 * time.Millisecond

// Validator is the validating admission handler for EC2NodeClasses
// (karpenter.k8s.aws/v1) and NodePools (karpenter.sh/v1). It runs the rules
// of package lint: denials reject the request with every denial's rule ID,
// field, line and fix in the message; warnings become admission warnings of
// at most 120 characters. On update, a denial the old object already had
// becomes a warning (lint.Ratchet), so existing objects stay editable.
type Validator struct {
	// Reader looks up EC2NodeClasses for nodeClassRef (KX101); nil skips
	// the check.
	Reader client.Reader
	// LookupTimeout bounds that lookup; 0 means DefaultLookupTimeout.
	LookupTimeout time.Duration
	// Disabled lists rule IDs to skip.
	Disabled map[string]bool
}

// Handle implements admission.Handler.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	// The logger is built only when something is logged (or, for
	// NodePools, handed to the lookup): most requests log nothing.
	var logKey string
	var current, previous kxlint.Findings
	switch req.Kind.Kind {
	case "EC2NodeClass":
		logKey = "ec2NodeClass"
		nc, err := decode[apisv1.EC2NodeClass](req.Object.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		current = kxlint.CheckEC2NodeClass(nc)
		if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 && current.Denied() {
			if old, err := decode[apisv1.EC2NodeClass](req.OldObject.Raw); err == nil {
				previous = kxlint.CheckEC2NodeClass(old)
			}
		}
	case "NodePool":
		logKey = "nodePool"
		np, err := decode[karpv1.NodePool](req.Object.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		current = kxlint.CheckNodePool(ctx, np, v.lookup(logf.FromContext(ctx).WithValues(logKey, req.Name)))
		if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 && current.Denied() {
			if old, err := decode[karpv1.NodePool](req.OldObject.Raw); err == nil {
				previous = kxlint.CheckNodePool(ctx, old, nil)
			}
		}
	default:
		return admission.Allowed("") // not ours: the configuration sends only these kinds
	}
	findings := kxlint.Ratchet(current.Without(v.Disabled), previous)
	dryRun := req.DryRun != nil && *req.DryRun
	if !dryRun {
		for _, f := range findings {
			findingsTotal.WithLabelValues(f.RuleID, string(f.Severity)).Inc()
		}
	}
	if len(findings) == 0 {
		return admission.Allowed("")
	}
	warnings := make([]string, 0, len(findings))
	for _, f := range findings {
		if f.Severity == kxlint.SeverityWarning {
			warnings = append(warnings, f.Warning())
		}
	}
	log := logf.FromContext(ctx).WithValues(logKey, req.Name)
	if findings.Denied() {
		msg := findings.DenialMessage()
		log.Info("denied", "rules", ruleIDs(findings.Denials()), "dryRun", dryRun)
		return admission.Denied(msg).WithWarnings(warnings...)
	}
	log.V(1).Info("admitted with warnings", "rules", ruleIDs(findings), "dryRun", dryRun)
	return admission.Allowed("").WithWarnings(warnings...)
}

// lookup returns the NodeClassLookup for KX101: a metadata-only Get of the
// EC2NodeClass through Reader, bounded by LookupTimeout.
func (v *Validator) lookup(log logr.Logger) kxlint.NodeClassLookup {
	if v.Reader == nil {
		return nil
	}
	timeout := v.LookupTimeout
	if timeout == 0 {
		timeout = DefaultLookupTimeout
	}
	return func(ctx context.Context, name string) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(apisv1.SchemeGroupVersion.WithKind("EC2NodeClass"))
		err := v.Reader.Get(ctx, client.ObjectKey{Name: name}, obj)
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil
		default:
			log.V(1).Info("EC2NodeClass lookup failed; skipping nodeClassRef check", "name", name, "error", err.Error())
			return false, err
		}
	}
}

func decode[T any](raw []byte) (*T, error) {
	var obj T
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("decoding object: %w", err)
	}
	return &obj, nil
}

func ruleIDs(fs kxlint.Findings) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.RuleID
	}
	return out
}
