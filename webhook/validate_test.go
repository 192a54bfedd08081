package webhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kxlint "github.com/karpx/karpx/lint"
)

func ec2NodeClassJSON(userData string) []byte {
	return []byte(`{"apiVersion":"karpenter.k8s.aws/v1","kind":"EC2NodeClass","metadata":{"name":"nc"},"spec":{"amiSelectorTerms":[{"alias":"al2023@latest"}],"userData":` + quote(userData) + `}}`)
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\n':
			b.WriteString(`\n`)
		case '"':
			b.WriteString(`\"`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func TestValidatorDeniesAndRatchets(t *testing.T) {
	v := &Validator{}
	bad := ec2NodeClassJSON("#!/bin/bash\nreboot\n")
	req := request(admissionv1.Create, bad, nil, false)
	req.Kind = metav1.GroupVersionKind{Group: "karpenter.k8s.aws", Version: "v1", Kind: "EC2NodeClass"}
	resp := v.Handle(context.Background(), req)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "KX003 spec.userData line 2") {
		t.Fatalf("want KX003 denial, got %+v", resp.Result)
	}
	// An update that leaves the bad userData as it was is admitted with a
	// warning; one that adds a new problem is denied.
	upd := request(admissionv1.Update, bad, bad, false)
	upd.Kind = req.Kind
	if resp := v.Handle(context.Background(), upd); !resp.Allowed || len(resp.Warnings) == 0 {
		t.Fatalf("unchanged problem blocked the update: %+v", resp)
	}
	worse := request(admissionv1.Update, ec2NodeClassJSON("#!/bin/bash\nreboot\nsystemctl stop containerd\n"), bad, false)
	worse.Kind = req.Kind
	if resp := v.Handle(context.Background(), worse); resp.Allowed {
		t.Fatal("new problem admitted")
	}
	// Disabled rules are skipped.
	v.Disabled = map[string]bool{kxlint.RuleUserDataNodeRestart: true}
	if resp := v.Handle(context.Background(), req); !resp.Allowed {
		t.Fatalf("disabled rule still denies: %+v", resp.Result)
	}
}

func TestValidatorWarningsFit(t *testing.T) {
	v := &Validator{}
	req := request(admissionv1.Create, ec2NodeClassJSON("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: a-very-long-cluster-name-that-goes-on-and-on\n    apiServerEndpoint: https://example.com\n    certificateAuthority: Zm9v\n"), nil, false)
	req.Kind = metav1.GroupVersionKind{Group: "karpenter.k8s.aws", Version: "v1", Kind: "EC2NodeClass"}
	resp := v.Handle(context.Background(), req)
	if !resp.Allowed || len(resp.Warnings) != 3 {
		t.Fatalf("want 3 warnings, got %+v", resp)
	}
	for _, w := range resp.Warnings {
		if len(w) > kxlint.MaxWarningLength {
			t.Errorf("warning of %d bytes: %q", len(w), w)
		}
	}
}
