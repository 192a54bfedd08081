package userdata

import (
	"strings"
	"testing"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/lint"
)

// The merge parses userData with the webhook's bounds: over EC2's 16 KB
// nothing is parsed, and Bottlerocket TOML nested past lint.MaxTOMLDepth is
// refused before the TOML parser runs (16 KB of nested inline tables took
// it seconds and hundreds of MB). Each with its control.
func TestGenerateBoundsUserData(t *testing.T) {
	base := Options{ClusterName: "c", ClusterEndpoint: "https://x", CABundle: "Y2E="}
	gen := func(family, ud string) error {
		o := base
		o.Family, o.CustomUserData = family, &ud
		_, err := Generate(o)
		return err
	}
	at := "#!/bin/bash\n" + strings.Repeat("#", lint.MaxUserDataBytes-13) + "\n"
	if err := gen(v1.AMIFamilyAL2023, at); err != nil {
		t.Fatalf("control: %d bytes: %v", len(at), err)
	}
	over := "#!/bin/bash\n" + strings.Repeat("((", lint.MaxUserDataBytes) + "\n"
	if err := gen(v1.AMIFamilyAL2023, over); err == nil || !strings.Contains(err.Error(), "spec.userData is 32781 bytes; EC2 accepts at most 16384") {
		t.Fatalf("%d bytes: got %v, want the size error", len(over), err)
	}
	nested := func(depth int) string {
		return "[settings.x]\na = " + strings.Repeat("{b = ", depth) + "1" + strings.Repeat("}", depth) + "\n"
	}
	if err := gen(v1.AMIFamilyBottlerocket, nested(lint.MaxTOMLDepth)); err != nil {
		t.Fatalf("control: TOML nested %d deep: %v", lint.MaxTOMLDepth, err)
	}
	if err := gen(v1.AMIFamilyBottlerocket, nested(2600)); err == nil || !strings.Contains(err.Error(), "nest more than 32 levels") {
		t.Fatalf("TOML nested 2,600 deep: got %v, want the nesting error", err)
	}
}
