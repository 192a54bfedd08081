package startuptaints_test

import (
	"net/url"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpx/karpx/catalog/startuptaints"
)

func TestBuiltinRulesAreSourcedAndTainting(t *testing.T) {
	names := map[string]bool{}
	for _, r := range startuptaints.Builtin() {
		if r.Name == "" || names[r.Name] {
			t.Errorf("rule %q: empty or duplicate name", r.Name)
		}
		names[r.Name] = true
		if u, err := url.Parse(r.Source); err != nil || u.Scheme != "https" {
			t.Errorf("rule %q: source %q is not an https URL", r.Name, r.Source)
		}
		if len(r.Taints) == 0 {
			t.Errorf("rule %q has no taints", r.Name)
		}
	}
	for _, want := range []string{"cilium", "aws-ebs-csi-node", "aws-efs-csi-node", "istio-cni"} {
		if !names[want] {
			t.Errorf("no built-in rule %q", want)
		}
	}
}

func TestBuiltinIsAFreshCopy(t *testing.T) {
	first := startuptaints.Builtin()
	first[0].Name = "changed"
	first[0].Taints[0] = corev1.Taint{Key: "changed"}
	again := startuptaints.Builtin()
	if again[0].Name == "changed" || again[0].Taints[0].Key == "changed" {
		t.Errorf("a caller's change reached the table: %+v", again[0])
	}
}
