package webhook_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// ec2NodeClassWithUserData renders an EC2NodeClass manifest with the given
// amiFamily ("" for none), alias term and userData.
func ec2NodeClassWithUserData(t *testing.T, name, family, alias, userData string) string {
	t.Helper()
	spec := map[string]any{
		"role":                       "KarpenterNodeRole-test",
		"subnetSelectorTerms":        []any{map[string]any{"tags": map[string]any{"karpenter.sh/discovery": "test"}}},
		"securityGroupSelectorTerms": []any{map[string]any{"tags": map[string]any{"karpenter.sh/discovery": "test"}}},
		"amiSelectorTerms":           []any{map[string]any{"alias": alias}},
		"userData":                   userData,
	}
	if family != "" {
		spec["amiFamily"] = family
	}
	out, err := yaml.Marshal(map[string]any{
		"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
		"metadata": map[string]any{"name": name}, "spec": spec,
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// The hostile userData of issue 14, applied with the real kubectl through
// the real API server: a multipart nested in a multipart, its inner part
// base64-encoded, hiding a secret key and a kubelet restart split over two
// lines. The webhook must deny it and name both; the same tree with a
// harmless script is admitted (the control).
func TestApplyNestedMIMEUserDataDenied(t *testing.T) {
	requireSuite(t)
	nested := func(script string) string {
		inner := "--IN\nContent-Type: text/x-shellscript\nContent-Transfer-Encoding: base64\n\n" +
			base64.StdEncoding.EncodeToString([]byte(script)) + "\n--IN--\n"
		return "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"OUT\"\n\n" +
			"--OUT\nContent-Type: multipart/mixed; boundary=\"IN\"\n\n" + inner + "--OUT--\n"
	}
	hostile := nested("#!/bin/bash\nexport AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nsystemctl restart \\\n  kubelet\n")
	_, stderr, err := kubectl(t, ec2NodeClassWithUserData(t, "nested-hostile", "", "al2023@latest", hostile), "apply", "--dry-run=server", "-f", "-")
	if err == nil {
		t.Fatal("nested hostile userData admitted")
	}
	for _, want := range []string{`admission webhook "ec2nodeclasses.karpx.io" denied the request`, "KX003", "KX005", "MIME part 1.1"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if _, stderr, err := kubectl(t, ec2NodeClassWithUserData(t, "nested-ok", "", "al2023@latest", nested("#!/bin/bash\necho ok\n")), "apply", "--dry-run=server", "-f", "-"); err != nil {
		t.Fatalf("control: harmless nested userData denied: %v\n%s", err, stderr)
	}
}

// amiFamily Custom with an alias: userData is passed through verbatim, so
// MIME userData is admitted although the alias's family (Bottlerocket)
// reads TOML; without amiFamily the same userData is denied as bad TOML.
func TestApplyCustomFamilyWithAliasAdmitted(t *testing.T) {
	requireSuite(t)
	ud := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n\n#!/bin/bash\necho custom\n--B--\n"
	if _, stderr, err := kubectl(t, ec2NodeClassWithUserData(t, "custom-alias", "Custom", "bottlerocket@latest", ud), "apply", "--dry-run=server", "-f", "-"); err != nil {
		t.Fatalf("Custom family with alias denied: %v\n%s", err, stderr)
	}
	_, stderr, err := kubectl(t, ec2NodeClassWithUserData(t, "br-alias", "", "bottlerocket@latest", ud), "apply", "--dry-run=server", "-f", "-")
	if err == nil || !strings.Contains(stderr, "KX002") {
		t.Fatalf("control: Bottlerocket alias with MIME userData: %v\n%s", err, stderr)
	}
}
