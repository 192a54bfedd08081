package timeouts

import (
	"testing"
	"time"
)

func TestDefaultFillsOnlyUnset(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, LaunchTTL},
		{-time.Second, LaunchTTL},
		{time.Second, time.Second},
	} {
		d := tc.in
		Default(&d, LaunchTTL)
		if d != tc.want {
			t.Errorf("Default(%s, %s) = %s, want %s", tc.in, LaunchTTL, d, tc.want)
		}
	}
}
