package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kxlint "github.com/karpx/karpx/lint"
)

var ciliumAndEBS = StaticTaintProvider{
	{Rule: "cilium", Taint: corev1.Taint{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoExecute}},
	{Rule: "cilium", Taint: corev1.Taint{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
	{Rule: "aws-ebs-csi-node", Taint: corev1.Taint{Key: "ebs.csi.aws.com/agent-not-ready", Effect: corev1.TaintEffectNoExecute}},
}

func nodePoolJSON(annotations, templateSpec string) []byte {
	return []byte(`{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"np"` + annotations + `},"spec":{"template":{"spec":` + templateSpec + `}}}`)
}

func request(op admissionv1.Operation, obj, old []byte, dryRun bool) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: op, Name: "np", DryRun: ptr.To(dryRun),
		Object: runtime.RawExtension{Raw: obj}, OldObject: runtime.RawExtension{Raw: old},
	}}
}

// apply runs the handler and applies its patch, returning the mutated
// object's startup taints as "key:Effect" and the response.
func apply(t *testing.T, d *NodePoolDefaulter, req admission.Request) ([]string, []byte, admission.Response) {
	t.Helper()
	resp := d.Handle(context.Background(), req)
	if !resp.Allowed {
		t.Fatalf("not allowed: %+v", resp.Result)
	}
	obj := req.Object.Raw
	if len(resp.Patches) > 0 {
		raw, err := json.Marshal(resp.Patches)
		if err != nil {
			t.Fatal(err)
		}
		p, err := jsonpatch.DecodePatch(raw)
		if err != nil {
			t.Fatal(err)
		}
		if obj, err = p.Apply(obj); err != nil {
			t.Fatalf("patch does not apply: %v", err)
		}
	}
	var np nodePoolTaintFields
	if err := json.Unmarshal(obj, &np); err != nil {
		t.Fatal(err)
	}
	var ts []corev1.Taint
	_ = json.Unmarshal(np.Spec.Template.Spec.StartupTaints, &ts)
	out := make([]string, len(ts))
	for i, x := range ts {
		out[i] = x.Key + ":" + string(x.Effect)
	}
	return out, obj, resp
}

func TestDefaulterAddsMissingTaintsIdempotently(t *testing.T) {
	d := &NodePoolDefaulter{Taints: ciliumAndEBS}
	in := nodePoolJSON("", `{"nodeClassRef":{"name":"x"},"taints":[{"key":"ebs.csi.aws.com/agent-not-ready","effect":"NoExecute"}],"startupTaints":[{"key":"mine","effect":"NoSchedule"},{"key":"node.cilium.io/agent-not-ready","value":"other","effect":"NoExecute"}]}`)
	got, out, resp := apply(t, d, request(admissionv1.Create, in, nil, false))
	want := "mine:NoSchedule,node.cilium.io/agent-not-ready:NoExecute,node.cilium.io/agent-not-ready:NoSchedule"
	if strings.Join(got, ",") != want {
		t.Fatalf("got %v, want %s", got, want)
	}
	if len(resp.Warnings) != 1 || len(resp.Warnings[0]) > kxlint.MaxWarningLength || !strings.Contains(resp.Warnings[0], "node.cilium.io/agent-not-ready:NoSchedule") {
		t.Fatalf("bad warnings %q", resp.Warnings)
	}
	// Second pass over the mutated object: nothing to do.
	_, _, resp = apply(t, d, request(admissionv1.Update, out, out, false))
	if len(resp.Patches) != 0 || len(resp.Warnings) != 0 {
		t.Fatalf("second pass changed something: %+v", resp)
	}
}

func TestDefaulterNoListYet(t *testing.T) {
	d := &NodePoolDefaulter{Taints: ciliumAndEBS}
	got, _, _ := apply(t, d, request(admissionv1.Create, nodePoolJSON("", `{"nodeClassRef":{"name":"x"}}`), nil, false))
	if len(got) != 3 {
		t.Fatalf("got %v", got)
	}
}

func TestDefaulterDryRunSameAnswer(t *testing.T) {
	d := &NodePoolDefaulter{Taints: ciliumAndEBS}
	in := nodePoolJSON("", `{"nodeClassRef":{"name":"x"}}`)
	a, _, ra := apply(t, d, request(admissionv1.Create, in, nil, false))
	b, _, rb := apply(t, d, request(admissionv1.Create, in, nil, true))
	if strings.Join(a, ",") != strings.Join(b, ",") || strings.Join(ra.Warnings, "") != strings.Join(rb.Warnings, "") {
		t.Fatalf("dry run differs: %v %v", a, b)
	}
}

func TestDefaulterOptOut(t *testing.T) {
	d := &NodePoolDefaulter{Taints: ciliumAndEBS}
	resp := d.Handle(context.Background(), request(admissionv1.Create, nodePoolJSON(`,"annotations":{"karpx.io/startup-taints":"disabled"}`, `{}`), nil, false))
	if !resp.Allowed || len(resp.Patches) != 0 {
		t.Fatalf("opt-out ignored: %+v", resp)
	}
}

func TestTaintSummaryFits(t *testing.T) {
	var many []ActiveTaint
	for i := 0; i < 20; i++ {
		many = append(many, ActiveTaint{Taint: corev1.Taint{Key: "example.com/some-rather-long-agent-name-not-ready", Effect: corev1.TaintEffectNoExecute}})
	}
	s := taintSummary(many, kxlint.MaxWarningLength)
	if len(s) > kxlint.MaxWarningLength || !strings.Contains(s, "more)") {
		t.Fatalf("summary %q (%d bytes)", s, len(s))
	}
}

func TestParseTaintRules(t *testing.T) {
	rules, err := ParseTaintRules("rules:\n- name: a\n  daemonSetSelector: app=a\n  taints: [{key: example.com/a, effect: NoSchedule}]\n- name: cilium\n  enabled: false\n")
	if err != nil {
		t.Fatal(err)
	}
	merged := MergeTaintRules(BuiltinTaintRules(), rules)
	if len(merged) != len(BuiltinTaintRules())+1 || merged[0].Name != "cilium" || merged[0].Enabled == nil || *merged[0].Enabled || len(merged[0].Taints) != 2 {
		t.Fatalf("bad merge %+v", merged)
	}
	for _, bad := range []string{
		"rules:\n- taints: [{key: a, effect: NoSchedule}]\n",
		"rules:\n- name: x\n  taints: [{key: a, effect: Sometimes}]\n",
		"rules:\n- name: x\n  taints: [{key: 'bad key', effect: NoSchedule}]\n",
		"rules:\n- name: x\n  daemonSetSelector: 'a in (('\n  taints: [{key: a, effect: NoSchedule}]\n",
		"rules:\n- name: x\n",
		"rulez: []\n",
	} {
		if _, err := ParseTaintRules(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestBuiltinRulesDocumented(t *testing.T) {
	for _, r := range BuiltinTaintRules() {
		if r.Source == "" || len(r.Taints) == 0 {
			t.Errorf("rule %s incomplete", r.Name)
		}
		// Opt-in rules (no selector) must say how to turn them on.
		if r.DaemonSetSelector == "" && r.Name != "istio-cni" {
			t.Errorf("rule %s is neither detected nor a documented opt-in", r.Name)
		}
	}
}

// The Istio CNI taint is removed by istiod's untaint controller, which is
// off by default: the istio-cni-node DaemonSet alone must not turn the rule
// on (nodes would stay tainted), the ConfigMap does.
func TestIstioRuleIsOptIn(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "istio-cni-node", Namespace: "istio-system", Labels: map[string]string{"k8s-app": "istio-cni-node"}}}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "rules", Namespace: "karpx-system"},
		Data:       map[string]string{TaintRulesConfigKey: "rules:\n- {name: istio-cni, enabled: true}\n"},
	}
	keys := func(p *ClusterTaintProvider) string {
		active, err := p.ActiveTaints(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range active {
			out = append(out, a.Rule+"="+a.Taint.Key+":"+string(a.Taint.Effect))
		}
		return strings.Join(out, ",")
	}
	detected := &ClusterTaintProvider{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(ds).Build()}
	if got := keys(detected); got != "" {
		t.Fatalf("istio-cni DaemonSet alone turned on %q", got)
	}
	enabled := &ClusterTaintProvider{
		Reader:    fake.NewClientBuilder().WithScheme(scheme).WithObjects(ds, cm).Build(),
		ConfigMap: types.NamespacedName{Namespace: "karpx-system", Name: "rules"},
	}
	if got := keys(enabled); got != "istio-cni=cni.istio.io/not-ready:NoSchedule" {
		t.Fatalf("enabled in the ConfigMap: got %q", got)
	}
}
