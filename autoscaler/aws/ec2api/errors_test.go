package ec2api

import (
	"fmt"
	"testing"

	"github.com/aws/smithy-go"
)

func TestClassification(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &smithy.GenericAPIError{Code: CodeInstanceNotFound, Message: "gone"})
	if got := Code(err); got != CodeInstanceNotFound {
		t.Fatalf("Code = %q", got)
	}
	if Code(fmt.Errorf("plain")) != "" {
		t.Fatal("Code of a non-API error must be empty")
	}
	for _, c := range []struct {
		code                        string
		notFound, ice, exists, perm bool
	}{
		{code: CodeInstanceNotFound, notFound: true},
		{code: CodeLaunchTemplateNameNotFound, notFound: true, perm: true},
		{code: CodeParameterNotFound, notFound: true},
		{code: CodeInsufficientInstanceCapacity, ice: true},
		{code: "VcpuLimitExceeded", ice: true},
		{code: CodeLaunchTemplateNameAlreadyExists, exists: true, perm: true},
		{code: "InvalidParameterValue", perm: true},
		{code: "InvalidAMIID.Malformed", perm: true},
		{code: "UnauthorizedOperation", perm: true},
		{code: "RequestLimitExceeded"},
		{code: "InternalError"},
	} {
		if IsNotFound(c.code) != c.notFound || IsInsufficientCapacity(c.code) != c.ice ||
			IsAlreadyExists(c.code) != c.exists || IsPermanent(c.code) != c.perm {
			t.Errorf("%s: notFound=%v ice=%v exists=%v perm=%v", c.code,
				IsNotFound(c.code), IsInsufficientCapacity(c.code), IsAlreadyExists(c.code), IsPermanent(c.code))
		}
	}
}
