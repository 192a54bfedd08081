package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"

	kxlint "github.com/karpx/karpx/lint"
)

func ec2NodeClassJSON(userData string) []byte {
	return []byte(`{"apiVersion":"karpenter.k8s.aws/v1","kind":"EC2NodeClass","metadata":{"name":"nc"},"spec":{"amiSelectorTerms":[{"alias":"al2023@latest"}],"userData":` + quote(userData) + `}}`)
}

// quote is s as a JSON string (backslashes, tabs and control characters
// escaped, so the webhook decodes exactly s).
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// ec2NodeClassRequest is an EC2NodeClass admission request of op for the
// object and old object given as JSON (old nil for none).
func ec2NodeClassRequest(t *testing.T, op admissionv1.Operation, obj, old []byte) *objectRequest[ec2NodeClassUserData] {
	t.Helper()
	o, err := decode[ec2NodeClassUserData](obj)
	if err != nil {
		t.Fatal(err)
	}
	return &objectRequest[ec2NodeClassUserData]{UID: "1", Name: "nc", Operation: op, Object: o, OldObject: old}
}

func TestValidatorDeniesAndRatchets(t *testing.T) {
	v := &Validator{}
	bad := ec2NodeClassJSON("#!/bin/bash\nreboot\n")
	req := ec2NodeClassRequest(t, admissionv1.Create, bad, nil)
	resp := v.admitEC2NodeClass(context.Background(), req)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "KX003 spec.userData line 2") {
		t.Fatalf("want KX003 denial, got %+v", resp.Result)
	}
	// An update that leaves the bad userData as it was is admitted with a
	// warning; one that adds a new problem is denied.
	upd := ec2NodeClassRequest(t, admissionv1.Update, bad, bad)
	if resp := v.admitEC2NodeClass(context.Background(), upd); !resp.Allowed || len(resp.Warnings) == 0 {
		t.Fatalf("unchanged problem blocked the update: %+v", resp)
	}
	worse := ec2NodeClassRequest(t, admissionv1.Update, ec2NodeClassJSON("#!/bin/bash\nreboot\nsystemctl stop containerd\n"), bad)
	if resp := v.admitEC2NodeClass(context.Background(), worse); resp.Allowed {
		t.Fatal("new problem admitted")
	}
	// Disabled rules are skipped.
	v.Disabled = map[string]bool{kxlint.RuleUserDataNodeRestart: true}
	if resp := v.admitEC2NodeClass(context.Background(), req); !resp.Allowed {
		t.Fatalf("disabled rule still denies: %+v", resp.Result)
	}
}

func TestValidatorWarningsFit(t *testing.T) {
	v := &Validator{}
	req := ec2NodeClassRequest(t, admissionv1.Create, ec2NodeClassJSON("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: a-very-long-cluster-name-that-goes-on-and-on\n    apiServerEndpoint: https://example.com\n    certificateAuthority: Zm9v\n"), nil)
	resp := v.admitEC2NodeClass(context.Background(), req)
	if !resp.Allowed || len(resp.Warnings) != 3 {
		t.Fatalf("want 3 warnings, got %+v", resp)
	}
	for _, w := range resp.Warnings {
		if len(w) > kxlint.MaxWarningLength {
			t.Errorf("warning of %d bytes: %q", len(w), w)
		}
	}
}

// TestValidatorCountsDecisions: each answer to a CREATE or UPDATE review is
// counted once in karpx_webhook_decisions_total under its resource and
// decision (dry runs too); a DELETE is not a decision.
func TestValidatorCountsDecisions(t *testing.T) {
	v := &Validator{}
	count := func(decision string) float64 {
		return testutil.ToFloat64(decisionsTotal.WithLabelValues("ec2nodeclasses", decision))
	}
	before := map[string]float64{DecisionAllowed: count(DecisionAllowed), DecisionWarned: count(DecisionWarned), DecisionDenied: count(DecisionDenied)}
	bad := ec2NodeClassJSON("#!/bin/bash\nreboot\n")
	dry := ec2NodeClassRequest(t, admissionv1.Create, bad, nil)
	dry.DryRun = new(bool)
	*dry.DryRun = true
	for _, req := range []*objectRequest[ec2NodeClassUserData]{
		ec2NodeClassRequest(t, admissionv1.Create, ec2NodeClassJSON(""), nil), // allowed
		ec2NodeClassRequest(t, admissionv1.Create, bad, nil),                  // denied
		dry, // denied (dry run)
		ec2NodeClassRequest(t, admissionv1.Update, bad, bad),                  // warned: the problem was already there
		{UID: "2", Name: "nc", Operation: admissionv1.Delete, OldObject: bad}, // not a decision
	} {
		v.admitEC2NodeClass(context.Background(), req)
	}
	for decision, want := range map[string]float64{DecisionAllowed: 1, DecisionDenied: 2, DecisionWarned: 1} {
		if got := count(decision) - before[decision]; got != want {
			t.Errorf("karpx_webhook_decisions_total{resource=ec2nodeclasses,decision=%s} grew by %v, want %v", decision, got, want)
		}
	}
}

// nodeOverlayRequest is a NodeOverlay admission request of op for the
// object and old object given as JSON (nil for none).
func nodeOverlayRequest(t *testing.T, op admissionv1.Operation, obj, old []byte) *objectRequest[nodeOverlayObject] {
	t.Helper()
	req := &objectRequest[nodeOverlayObject]{UID: "1", Name: "ov", Operation: op, OldObject: old}
	if obj != nil {
		o, err := decode[nodeOverlayObject](obj)
		if err != nil {
			t.Fatal(err)
		}
		req.Object = o
	}
	return req
}

// TestValidatorNodeOverlay: karpx applies NodeOverlays (issue 33), so
// creating one, changing its spec, a metadata-only update and a DELETE are
// all admitted; what the CRD's schema cannot check is the autoscaler's
// ValidationSucceeded condition's to report, as in Karpenter.
func TestValidatorNodeOverlay(t *testing.T) {
	v := &Validator{}
	const stored = `{"apiVersion":"karpenter.sh/v1alpha1","kind":"NodeOverlay","metadata":{"name":"ov","finalizers":["example.com/keep"]},"spec":{"priceAdjustment":"-10%","requirements":[{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot"]}]}}`
	const cleaned = `{"apiVersion":"karpenter.sh/v1alpha1","kind":"NodeOverlay","metadata":{"name":"ov","labels":{"a":"b"}},"spec":{"requirements":[{"values":["spot"],"operator":"In","key":"karpenter.sh/capacity-type"}],"priceAdjustment":"-10%"}}`
	const changed = `{"apiVersion":"karpenter.sh/v1alpha1","kind":"NodeOverlay","metadata":{"name":"ov"},"spec":{"priceAdjustment":"-20%","requirements":[{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot"]}]}}`
	allowed := func(name string, req *objectRequest[nodeOverlayObject]) {
		t.Helper()
		if resp := v.admitNodeOverlay(context.Background(), req); !resp.Allowed {
			t.Fatalf("%s: denied: %s", name, resp.Result.Message)
		}
	}
	allowed("create", nodeOverlayRequest(t, admissionv1.Create, []byte(stored), nil))
	allowed("spec change", nodeOverlayRequest(t, admissionv1.Update, []byte(changed), []byte(stored)))
	allowed("update with an undecodable old object", nodeOverlayRequest(t, admissionv1.Update, []byte(stored), []byte(`{"spec":[`)))
	bare := nodeOverlayRequest(t, admissionv1.Create, []byte(`{"spec":{}}`), nil)
	bare.Kind.Group, bare.Kind.Version, bare.Kind.Kind = "karpenter.sh", "v1alpha1", "NodeOverlay"
	allowed("create without apiVersion and kind", bare)
	allowed("metadata-only update", nodeOverlayRequest(t, admissionv1.Update, []byte(cleaned), []byte(stored)))
	allowed("delete", nodeOverlayRequest(t, admissionv1.Delete, nil, []byte(stored)))
}

// TestSameSpec is sameSpec's table: absent and null are equal, key order
// does not matter, a changed value or an undecodable spec differs.
func TestSameSpec(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`, true},
		{``, `null`, true},
		{`{"a":1}`, `{"a":2}`, false},
		{`{"b":[1,2]}`, `{"b":[2,1]}`, false},
		{`{"a":1}`, ``, false},
		{`{"a":`, `{"a":`, true}, // byte-equal: the same stored text
		{`{"a":`, `{"a":1}`, false},
	} {
		if got := sameSpec(json.RawMessage(c.a), json.RawMessage(c.b)); got != c.want {
			t.Errorf("sameSpec(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
