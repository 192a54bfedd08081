package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// servedAfter is a RESTMapper that maps a kind only from its n-th
// RESTMapping call on (never, for n < 0), answering NoKindMatchError
// before, as controller-runtime's mapper does for a CRD the API server
// does not serve yet.
type servedAfter struct {
	meta.RESTMapper
	n     int
	calls int
}

func (m *servedAfter) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.calls++
	if m.n < 0 || m.calls < m.n {
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
	}
	return &meta.RESTMapping{GroupVersionKind: gk.WithVersion(versions[0])}, nil
}

// TestWaitForKindsWaitsForTheCRD: a kind the API server serves only from
// the third question on (a CRD registered a moment after a restart) is
// waited for, not an exit.
func TestWaitForKindsWaitsForTheCRD(t *testing.T) {
	m := &servedAfter{n: 3}
	if err := waitForKinds(context.Background(), m, time.Millisecond, time.Minute, servedKinds[0]); err != nil {
		t.Fatalf("waitForKinds = %v, want nil once the kind is served", err)
	}
	if m.calls != 3 {
		t.Fatalf("RESTMapping asked %d times, want 3 (until it answered)", m.calls)
	}
}

// TestWaitForKindsNamesTheMissingCRD: a kind never served ends the wait
// after the timeout with an error naming the kind and the fix.
func TestWaitForKindsNamesTheMissingCRD(t *testing.T) {
	err := waitForKinds(context.Background(), &servedAfter{n: -1}, time.Millisecond, 20*time.Millisecond, servedKinds...)
	if err == nil {
		t.Fatal("waitForKinds = nil, want an error for a kind never served")
	}
	for _, want := range []string{"karpenter.sh/v1, Kind=NodeClaim", "install karpx's CRDs", "no matches for kind"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// TestWaitForKindsStopsWithItsContext: a cancelled context ends the wait
// with the context's error, not the timeout's message.
func TestWaitForKindsStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitForKinds(ctx, &servedAfter{n: -1}, time.Millisecond, time.Minute, servedKinds...); err != context.Canceled {
		t.Fatalf("waitForKinds = %v, want context.Canceled", err)
	}
}
