package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kxlint "github.com/karpx/karpx/lint"
)

// StartupTaintsAnnotation on a NodePool set to "disabled" (or "false")
// stops the mutating webhook from adding startup taints to it.
const StartupTaintsAnnotation = "karpx.io/startup-taints"

// NodePoolDefaulter is the mutating admission handler for karpenter.sh/v1
// NodePools: it appends to spec.template.spec.startupTaints every taint
// from Taints whose key/effect pair is in neither startupTaints nor taints.
//
// It is idempotent (a NodePool that already has the taints gets no patch),
// keeps the user's taints and their order (taints are only appended), never
// adds a key/effect pair twice, returns one admission warning of at most
// 120 characters naming what it added, has no side effects (so dry-run
// requests get the same answer and change nothing), and fails open: if the
// taints cannot be determined it admits the NodePool unchanged.
type NodePoolDefaulter struct {
	// Taints says which taints apply to the cluster.
	Taints TaintProvider
}

// nodePoolTaintFields is the part of a NodePool the defaulter reads.
type nodePoolTaintFields struct {
	Metadata struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Template struct {
			Spec *struct {
				StartupTaints json.RawMessage `json:"startupTaints"`
				Taints        []corev1.Taint  `json:"taints"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// Handle implements admission.Handler.
func (d *NodePoolDefaulter) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var np nodePoolTaintFields
	if err := json.Unmarshal(req.Object.Raw, &np); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	log := logf.FromContext(ctx).WithValues("nodePool", np.Metadata.Name)
	if v := strings.ToLower(np.Metadata.Annotations[StartupTaintsAnnotation]); v == "disabled" || v == "false" {
		return admission.Allowed("startup taint injection disabled by " + StartupTaintsAnnotation)
	}
	tmpl := np.Spec.Template.Spec
	if tmpl == nil {
		return admission.Allowed("") // the CRD rejects a NodePool without spec.template.spec
	}
	var startup []corev1.Taint
	hasList := len(tmpl.StartupTaints) > 0 && string(tmpl.StartupTaints) != "null"
	if hasList {
		if err := json.Unmarshal(tmpl.StartupTaints, &startup); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	active, err := d.Taints.ActiveTaints(ctx)
	if err != nil {
		log.Error(err, "cannot determine startup taints; admitting NodePool unchanged")
		return admission.Allowed("")
	}
	added := missingTaints(active, startup, tmpl.Taints)
	if len(added) == 0 {
		return admission.Allowed("")
	}
	const path = "/spec/template/spec/startupTaints"
	var patches []jsonpatch.JsonPatchOperation
	if hasList {
		for _, a := range added {
			patches = append(patches, jsonpatch.JsonPatchOperation{Operation: "add", Path: path + "/-", Value: taintValue(a.Taint)})
		}
	} else {
		vals := make([]any, len(added))
		for i, a := range added {
			vals[i] = taintValue(a.Taint)
		}
		patches = append(patches, jsonpatch.JsonPatchOperation{Operation: "add", Path: path, Value: vals})
	}
	// On update, taints the stored object already has are restored, not
	// added: `kubectl apply` of an unchanged manifest replaces the list with
	// the user's and the webhook puts the taints back, so the object does
	// not change and there is nothing new to warn about.
	fresh := added
	if req.Operation == admissionv1.Update {
		fresh = missingTaints(added, oldStartupTaints(req.OldObject.Raw), nil)
	}
	dryRun := req.DryRun != nil && *req.DryRun
	if !dryRun {
		for _, a := range fresh {
			startupTaintsAdded.WithLabelValues(a.Rule).Inc()
		}
	}
	resp := admission.Patched("", patches...)
	if len(fresh) > 0 {
		log.V(1).Info("adding startup taints", "rules", ruleNames(fresh), "count", len(fresh), "dryRun", dryRun)
		resp.Warnings = []string{taintSummary(fresh, kxlint.MaxWarningLength)}
	}
	return resp
}

// oldStartupTaints returns spec.template.spec.startupTaints of the stored
// object, or nil.
func oldStartupTaints(raw []byte) []corev1.Taint {
	if len(raw) == 0 {
		return nil
	}
	var old nodePoolTaintFields
	if json.Unmarshal(raw, &old) != nil || old.Spec.Template.Spec == nil {
		return nil
	}
	var ts []corev1.Taint
	if json.Unmarshal(old.Spec.Template.Spec.StartupTaints, &ts) != nil {
		return nil
	}
	return ts
}

// taintValue is a taint as the JSON patch value, without empty fields.
func taintValue(t corev1.Taint) map[string]any {
	v := map[string]any{"key": t.Key, "effect": string(t.Effect)}
	if t.Value != "" {
		v["value"] = t.Value
	}
	return v
}
