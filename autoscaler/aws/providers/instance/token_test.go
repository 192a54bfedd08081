package instance

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// TestClientTokenFromNodeClaim: the same NodeClaim asking for the same
// launch sends the same ClientToken; another NodeClaim, or the same one
// asking for other offerings, sends another; without a UID the SDK's own
// token is left in place.
func TestClientTokenFromNodeClaim(t *testing.T) {
	api := &fakeAPI{out: &ec2.CreateFleetOutput{}}
	p := NewProvider(api, "demo", nil)
	token := func(uid string, mutate func(*LaunchRequest)) string {
		req := request("on-demand")
		req.NodeClaimUID = uid
		if mutate != nil {
			mutate(&req)
		}
		_, _ = p.Launch(context.Background(), req)
		if api.in.ClientToken == nil {
			return ""
		}
		return *api.in.ClientToken
	}
	first := token("uid-1", nil)
	if !strings.HasPrefix(first, "karpx-") || len(first) != 46 {
		t.Fatalf("token %q, want karpx- and 40 hex digits", first)
	}
	if again := token("uid-1", nil); again != first {
		t.Errorf("same NodeClaim, same launch: %q then %q", first, again)
	}
	if other := token("uid-2", nil); other == first {
		t.Error("two NodeClaims share a token")
	}
	if fallback := token("uid-1", func(r *LaunchRequest) { r.Configs = r.Configs[:1] }); fallback == first {
		t.Error("a launch with other offerings reuses the token (EC2: IdempotentParameterMismatch)")
	}
	if none := token("", nil); none != "" {
		t.Errorf("without a UID: token %q, want none (the SDK fills one per call)", none)
	}
}
