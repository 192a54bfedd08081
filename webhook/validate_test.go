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
