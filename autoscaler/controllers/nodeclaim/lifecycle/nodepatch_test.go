package lifecycle

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRegistrationPatchShape: the JSON patch escapes label keys (RFC 6901),
// tests an absent list as null before adding it whole, appends to a list
// that exists, tests the taints read before replacing them; and there is
// none (false: the caller's locked merge patch) for a change registration
// never makes, a label removed or another field changed.
func TestRegistrationPatchShape(t *testing.T) {
	read := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "1"}, Finalizers: []string{"other/f"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}}}}
	registered := read.DeepCopy()
	registered.Labels["karpenter.sh/registered"] = "true"
	registered.Finalizers = append(registered.Finalizers, "karpenter.sh/termination")
	registered.OwnerReferences = []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: "nc", UID: "u"}}
	registered.Spec.Taints = nil
	p, ok := registrationPatch(read, registered)
	if !ok {
		t.Fatal("no JSON patch for a registration")
	}
	data, err := p.Data(registered)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`{"op":"add","path":"/metadata/labels/karpenter.sh~1registered","value":"true"}`,
		`{"op":"add","path":"/metadata/finalizers/-","value":"karpenter.sh/termination"}`,
		`{"op":"test","path":"/metadata/ownerReferences","value":null}`,
		`{"op":"test","path":"/spec/taints","value":[{"key":"karpenter.sh/unregistered","effect":"NoExecute"}]}`,
		`{"op":"add","path":"/spec/taints","value":[]}`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("patch %s lacks %s", data, want)
		}
	}

	removed := registered.DeepCopy()
	delete(removed.Labels, "a")
	other := registered.DeepCopy()
	other.Spec.Unschedulable = true
	for name, n := range map[string]*corev1.Node{"a label removed": removed, "another field": other} {
		if _, ok := registrationPatch(read, n); ok {
			t.Errorf("%s: a JSON patch, want none", name)
		}
	}
}
