package crdschema_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/karpx/karpx/lint/crdschema"
	"github.com/karpx/karpx/manifests/crds"
)

func validator(t *testing.T) *crdschema.Validator {
	t.Helper()
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	v, err := crdschema.New(all...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func obj(t *testing.T, y string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

const class = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: a, namespace: ignored-for-cluster-scoped}
spec:
  role: r
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{id: subnet-1}]
  securityGroupSelectorTerms: [{id: sg-1}]
  metadataOptions: {}
`

func TestValidate(t *testing.T) {
	v := validator(t)
	ctx := context.Background()
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "karpenter.k8s.aws", Version: "v1", Kind: "EC2NodeClass"},
		{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"},
	} {
		if !v.Knows(gvk) {
			t.Errorf("does not know %v", gvk)
		}
	}
	if v.Knows(schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1beta1", Kind: "NodePool"}) {
		t.Error("knows karpenter.sh/v1beta1, which the CRDs do not serve")
	}

	// A valid cluster-scoped object with a namespace and an empty
	// metadataOptions (defaulted as the API server defaults it) passes.
	if unknown, errs := v.Validate(ctx, obj(t, class)); len(unknown)+len(errs) != 0 {
		t.Fatalf("valid object: unknown %v, errors %v", unknown, errs)
	}

	// Unknown fields are reported by path, and obj is not modified.
	bad := obj(t, class)
	bad["spec"].(map[string]any)["foo"] = "x"
	bad["spec"].(map[string]any)["kubelet"] = map[string]any{"bar": int64(1)}
	unknown, _ := v.Validate(ctx, bad)
	if strings.Join(unknown, ",") != "spec.foo,spec.kubelet.bar" {
		t.Fatalf("unknown fields %v", unknown)
	}
	if _, ok := bad["spec"].(map[string]any)["foo"]; !ok {
		t.Fatal("Validate pruned the caller's object")
	}

	// After a blocking error (an enum value) the CEL rules are not run,
	// and one error says so, as on the API server.
	enum := obj(t, strings.Replace(class, "role: r", "role: r\n  instanceProfile: p\n  amiFamily: Ubuntu", 1))
	_, errs := v.Validate(ctx, enum)
	got := errs.ToAggregate().Error()
	if !strings.Contains(got, `Unsupported value: "Ubuntu"`) || !strings.Contains(got, "some validation rules were not checked") || strings.Contains(got, "exactly one of") {
		t.Fatalf("errors %q", got)
	}
	// Control: without the enum error the CEL rule reports role and
	// instanceProfile together.
	both := obj(t, strings.Replace(class, "role: r", "role: r\n  instanceProfile: p", 1))
	if _, errs := v.Validate(ctx, both); !strings.Contains(errs.ToAggregate().Error(), "must specify exactly one of ['role', 'instanceProfile']") {
		t.Fatalf("CEL rule not run: %v", errs)
	}

	// An unknown kind is not validated.
	if unknown, errs := v.Validate(ctx, obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\nfoo: 1\n")); unknown != nil || errs != nil {
		t.Fatalf("ConfigMap: %v %v", unknown, errs)
	}
}
