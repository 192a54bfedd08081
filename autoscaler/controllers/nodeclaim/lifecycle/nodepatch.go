package lifecycle

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// jsonPatchOp is one operation of an RFC 6902 JSON patch. Value is always
// written, null included: a test of null passes when the path is absent
// (the API server's JSON patch, gopkg.in/evanphx/json-patch.v4).
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// pointerEscaper escapes a map key for a JSON pointer (RFC 6901 §3).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// registrationPatch returns the patch that turns stored, the Node as read,
// into node, registered: an RFC 6902 JSON patch that adds the labels,
// finalizers and owner references registration adds, and replaces
// spec.taints after a test that they are still those read. A merge patch
// replaces lists whole, so it needs an optimistic lock on the whole Node;
// that lock failed on nearly every Node (115 409s for 107 Nodes in a
// 500-pod head-to-head burst), because its kubelet (kwok here) writes
// status just after the Node appears. The test fails only when the taints
// changed since the read (an agent removed its startup taint, the node
// lifecycle controller added node.kubernetes.io/not-ready), where the
// replacement could lose a taint; labels, finalizers and owner references
// are added without replacing what others wrote. It returns false when the
// change is not of that shape (a label removed, a list reordered, a field
// other than those four changed): the caller then uses the locked merge
// patch.
func registrationPatch(stored, node *corev1.Node) (client.Patch, bool) {
	probe := stored.DeepCopy()
	probe.Labels, probe.Finalizers, probe.OwnerReferences, probe.Spec.Taints = node.Labels, node.Finalizers, node.OwnerReferences, node.Spec.Taints
	if !equality.Semantic.DeepEqual(probe, node) {
		return nil, false
	}
	var ops []jsonPatchOp
	labels, ok := mapOps("/metadata/labels", stored.Labels, node.Labels)
	if !ok {
		return nil, false
	}
	ops = append(ops, labels...)
	finalizers, ok := appendOps("/metadata/finalizers", stored.Finalizers, node.Finalizers)
	if !ok {
		return nil, false
	}
	ops = append(ops, finalizers...)
	owners, ok := appendOps("/metadata/ownerReferences", stored.OwnerReferences, node.OwnerReferences)
	if !ok {
		return nil, false
	}
	ops = append(ops, owners...)
	if !equality.Semantic.DeepEqual(stored.Spec.Taints, node.Spec.Taints) {
		var read any // null when there were none
		if len(stored.Spec.Taints) > 0 {
			read = stored.Spec.Taints
		}
		ops = append(ops, jsonPatchOp{Op: "test", Path: "/spec/taints", Value: read},
			jsonPatchOp{Op: "add", Path: "/spec/taints", Value: append([]corev1.Taint{}, node.Spec.Taints...)})
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return nil, false
	}
	return client.RawPatch(types.JSONPatchType, data), true
}

// mapOps returns the operations that add to the map at path the keys of
// want that old lacks or holds with another value; false when want lacks
// a key of old. A map that did not exist is tested absent and added whole.
func mapOps(path string, old, want map[string]string) ([]jsonPatchOp, bool) {
	for k := range old {
		if _, ok := want[k]; !ok {
			return nil, false
		}
	}
	if len(old) == 0 {
		if len(want) == 0 {
			return nil, true
		}
		return []jsonPatchOp{{Op: "test", Path: path, Value: nil}, {Op: "add", Path: path, Value: want}}, true
	}
	keys := make([]string, 0, len(want))
	for k, v := range want {
		if cur, ok := old[k]; !ok || cur != v {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	ops := make([]jsonPatchOp, 0, len(keys))
	for _, k := range keys {
		ops = append(ops, jsonPatchOp{Op: "add", Path: path + "/" + pointerEscaper.Replace(k), Value: want[k]})
	}
	return ops, true
}

// appendOps returns the operations that append to the list at path the
// elements want has after those of old; false unless old is a prefix of
// want. A list that did not exist is tested absent and added whole.
func appendOps[T any](path string, old, want []T) ([]jsonPatchOp, bool) {
	if len(want) < len(old) || !equality.Semantic.DeepEqual(old, want[:len(old)]) {
		return nil, false
	}
	if len(want) == len(old) {
		return nil, true
	}
	if len(old) == 0 {
		return []jsonPatchOp{{Op: "test", Path: path, Value: nil}, {Op: "add", Path: path, Value: slices.Clone(want)}}, true
	}
	ops := make([]jsonPatchOp, 0, len(want)-len(old))
	for _, e := range want[len(old):] {
		ops = append(ops, jsonPatchOp{Op: "add", Path: path + "/-", Value: e})
	}
	return ops, true
}
