package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
// (karpenter.k8s.aws/v1), NodePools (karpenter.sh/v1) and NodeOverlays
// (karpenter.sh/v1alpha1). It runs the rules
// of package lint: denials reject the request with every denial's rule ID,
// field, line and fix in the message; warnings become admission warnings of
// at most 120 characters. On update, a denial the old object already had
// becomes a warning (lint.Ratchet), so existing objects stay editable.
// Register serves it through objectHandler, one per kind.
type Validator struct {
	// Reader looks up EC2NodeClasses for nodeClassRef (KX101); nil skips
	// the check.
	Reader client.Reader
	// LookupTimeout bounds that lookup; 0 means DefaultLookupTimeout.
	LookupTimeout time.Duration
	// Disabled lists rule IDs to skip.
	Disabled map[string]bool
	// Unresolved is the severity of KX009 findings about commands karpx
	// cannot determine; empty means lint.SeverityDeny.
	Unresolved kxlint.Severity
}

// ec2NodeClassUserData is the part of an EC2NodeClass (karpenter.k8s.aws/v1)
// that the EC2NodeClass rules read. Decoding only this skips what the
// API server sends besides (managedFields, the last-applied-configuration
// copy of the object, resource quantities): about 10 KB and 90 allocations
// per review down to 3 KB and 20, measured on the load test's bodies
// (TestAdmissionLoad).
type ec2NodeClassUserData struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec ec2NodeClassSpec `json:"spec"`
}

// ec2NodeClassSpec is the decoded part of an EC2NodeClass's spec, and
// the findings of the deny list of fields karpx does not implement yet
// (kxlint.CheckUnsupportedSpec, which decodes only the members it names),
// found while the spec's JSON is at hand.
type ec2NodeClassSpec struct {
	AMIFamily        *string                  `json:"amiFamily,omitempty"`
	AMISelectorTerms []apisv1.AMISelectorTerm `json:"amiSelectorTerms,omitempty"`
	UserData         *string                  `json:"userData,omitempty"`
	unsupported      kxlint.Findings
}

// UnmarshalJSON implements json.Unmarshaler: the three fields, and the
// deny list's findings on data.
func (s *ec2NodeClassSpec) UnmarshalJSON(data []byte) error {
	type fields ec2NodeClassSpec // without this method
	if err := json.Unmarshal(data, (*fields)(s)); err != nil {
		return err
	}
	s.unsupported = kxlint.CheckUnsupportedSpec("EC2NodeClass", data)
	return nil
}

// ec2NodeClass returns an EC2NodeClass with the decoded fields set.
func (u *ec2NodeClassUserData) ec2NodeClass() *apisv1.EC2NodeClass {
	nc := &apisv1.EC2NodeClass{}
	nc.Name = u.Metadata.Name
	nc.Spec.AMIFamily, nc.Spec.AMISelectorTerms, nc.Spec.UserData = u.Spec.AMIFamily, u.Spec.AMISelectorTerms, u.Spec.UserData
	return nc
}

// admitEC2NodeClass validates an EC2NodeClass CREATE or UPDATE (anything
// else is allowed): the userData rules of package lint and its deny list
// of fields karpx does not implement yet (KX201).
func (v *Validator) admitEC2NodeClass(ctx context.Context, req *objectRequest[ec2NodeClassUserData]) admission.Response {
	return admit(ctx, v, req, "ec2nodeclasses", "ec2NodeClass", func(u *ec2NodeClassUserData, _ bool) kxlint.Findings {
		return append(u.Spec.unsupported, kxlint.CheckEC2NodeClass(u.ec2NodeClass()).WithUnresolvedSeverity(v.Unresolved)...)
	})
}

// admitNodePool validates a NodePool CREATE or UPDATE (anything else is
// allowed): the NodePool rules of package lint, with the EC2NodeClass
// lookup through Reader for the new object, and its deny list of fields
// karpx does not implement yet (KX202).
func (v *Validator) admitNodePool(ctx context.Context, req *objectRequest[karpv1.NodePool]) admission.Response {
	return admit(ctx, v, req, "nodepools", "nodePool", func(np *karpv1.NodePool, current bool) kxlint.Findings {
		var lookup kxlint.NodeClassLookup
		if current {
			lookup = v.lookup(logf.FromContext(ctx).WithValues("nodePool", req.Name))
		}
		return append(unsupportedNodePool(np), kxlint.CheckNodePool(ctx, np, lookup)...)
	})
}

// unsupportedNodePool runs the deny list on np's spec, re-encoded: every
// field of the NodePool CRD has a field in karpv1.NodePool, so nothing is
// lost (lint's TestEveryCRDPropertyReadOrDenied walks both), and the
// type's omitempty drops only empty values, which ask for nothing.
func unsupportedNodePool(np *karpv1.NodePool) kxlint.Findings {
	spec, err := json.Marshal(np.Spec)
	if err != nil {
		return nil
	}
	return kxlint.CheckUnsupportedSpec("NodePool", spec)
}

// nodeOverlayObject is the part of a NodeOverlay (karpenter.sh/v1alpha1)
// that admitNodeOverlay reads: apiVersion and kind, which KX203 (lint's
// unsupported kinds) matches, and the spec as JSON, compared with the
// stored object's.
type nodeOverlayObject struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Spec       json.RawMessage `json:"spec"`
}

// admitNodeOverlay checks creating a NodeOverlay, and an UPDATE that
// changes its spec, against KX203 (lint.RuleUnsupportedKind), which lists
// no kind since karpx applies NodeOverlays (autoscaler/nodeoverlay, behind
// the NodeOverlay feature gate, issue 33): every NodeOverlay is admitted,
// and its runtime validation and conflicts are reported by the
// autoscaler in its ValidationSucceeded condition, as Karpenter does. It
// allows an UPDATE that leaves the spec as stored (metadata only) without
// a check, and everything else (DELETE is not even sent to it by the
// manifests). An UPDATE whose old object cannot be decoded is treated as
// a spec change.
func (v *Validator) admitNodeOverlay(ctx context.Context, req *objectRequest[nodeOverlayObject]) admission.Response {
	if (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) || req.Object == nil {
		return admission.Allowed("")
	}
	if req.Operation == admissionv1.Update {
		if old, err := req.decodeOld(); err == nil && old != nil && sameSpec(old.Spec, req.Object.Spec) {
			decisionsTotal.WithLabelValues("nodeoverlays", DecisionAllowed).Inc()
			return admission.Allowed("")
		}
	}
	apiVersion, kind := req.Object.APIVersion, req.Object.Kind
	if kind == "" {
		apiVersion, kind = schema.GroupVersion{Group: req.Kind.Group, Version: req.Kind.Version}.String(), req.Kind.Kind
	}
	findings := kxlint.CheckUnsupported(map[string]any{"apiVersion": apiVersion, "kind": kind})
	return v.answer(ctx, "nodeoverlays", "nodeOverlay", req.Name, req.dryRun(), findings, nil)
}

// sameSpec reports whether two specs, as JSON, hold the same value
// (absent and null are the same; key order and spacing do not matter).
// A spec that does not decode differs from everything.
func sameSpec(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	if len(a) > 0 {
		if err := json.Unmarshal(a, &va); err != nil {
			return false
		}
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &vb); err != nil {
			return false
		}
	}
	return equality.Semantic.DeepEqual(va, vb)
}

// admit runs check on a CREATE or UPDATE (anything else is allowed) and
// answers; resource is the plural resource name (the resource label of
// karpx_webhook_decisions_total) and logKey the log key of the object's
// name. On an UPDATE that check denies, it also checks the old object
// (current false), so that Ratchet can turn denials the stored object
// already had into warnings.
func admit[T any](ctx context.Context, v *Validator, req *objectRequest[T], resource, logKey string, check func(obj *T, current bool) kxlint.Findings) admission.Response {
	if (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) || req.Object == nil {
		return admission.Allowed("")
	}
	current := check(req.Object, true)
	var previous kxlint.Findings
	if req.Operation == admissionv1.Update && current.Denied() {
		if old, err := req.decodeOld(); err == nil && old != nil {
			previous = check(old, false)
		}
	}
	return v.answer(ctx, resource, logKey, req.Name, req.dryRun(), current, previous)
}

// answer turns findings into the admission response: a denial when any
// finding (after Disabled and the ratchet against previous) denies,
// warnings otherwise. The logger is built only when something is logged:
// most requests log nothing.
func (v *Validator) answer(ctx context.Context, resource, logKey, name string, dryRun bool, current, previous kxlint.Findings) admission.Response {
	findings := kxlint.Ratchet(current.Without(v.Disabled), previous)
	if !dryRun {
		for _, f := range findings {
			findingsTotal.WithLabelValues(f.RuleID, string(f.Severity)).Inc()
		}
	}
	if len(findings) == 0 {
		decisionsTotal.WithLabelValues(resource, DecisionAllowed).Inc()
		return admission.Allowed("")
	}
	var warnings []string
	for _, f := range findings.Warnings() {
		warnings = append(warnings, f.Warning())
	}
	log := logf.FromContext(ctx).WithValues(logKey, name)
	if findings.Denied() {
		decisionsTotal.WithLabelValues(resource, DecisionDenied).Inc()
		log.Info("denied", "rules", ruleIDs(findings.Denials()), "dryRun", dryRun)
		return admission.Denied(findings.DenialMessage()).WithWarnings(warnings...)
	}
	decisionsTotal.WithLabelValues(resource, DecisionWarned).Inc()
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
