package disruption

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestOnlyConflicts: a pass that failed only on 409s (wrapped, or joined
// as markConditions joins its writes' errors) is retried without an
// error line; one that also failed otherwise is still an error.
func TestOnlyConflicts(t *testing.T) {
	conflict := apierrors.NewConflict(corev1.Resource("nodes"), "n1", errors.New("the object has been modified"))
	other := apierrors.NewInternalError(errors.New("etcd timeout"))
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a conflict wrapped", fmt.Errorf("setting karpenter.sh/disrupted on Node n1 to true: %w", conflict), true},
		{"conflicts joined", errors.Join(conflict, fmt.Errorf("updating conditions: %w", conflict)), true},
		{"a conflict joined with another error", errors.Join(conflict, other), false},
		{"another error", other, false},
		{"an empty join", errors.Join(nil), false},
	} {
		if got := tc.err != nil && onlyConflicts(tc.err); got != tc.want {
			t.Errorf("%s: onlyConflicts(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
