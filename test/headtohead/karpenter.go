package headtohead

import "testing"

// newKarpenter returns the upstream Karpenter side, or nil (after logging
// why) when it cannot run here.
func newKarpenter(t *testing.T, root string) Autoscaler {
	t.Logf("Karpenter side: not built yet (needs make karpenter-kwok and test/upstream)")
	return nil
}
