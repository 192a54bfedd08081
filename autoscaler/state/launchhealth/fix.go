package launchhealth

import (
	"fmt"
	"strings"
)

// FixFor names the EC2NodeClass field (or other setting) to check for a
// failure cause: "RegistrationTimeout" or "LaunchFailed/<AWS error code>".
// The code prefixes are EC2's documented error codes ("Error codes for the
// Amazon EC2 API").
func FixFor(cause, nodeClass string) string {
	code := strings.TrimPrefix(strings.TrimPrefix(cause, "LaunchFailed/"), "NodeClassNotReady")
	switch {
	case cause == "RegistrationTimeout":
		return fmt.Sprintf("instances start but their Nodes never register: check EC2NodeClass %q spec.userData (and spec.amiSelectorTerms), and the node's bootstrap log", nodeClass)
	case strings.HasPrefix(cause, "NodeClassNotReady"):
		return fmt.Sprintf("EC2NodeClass %q selector terms resolve to nothing: check spec.subnetSelectorTerms, spec.securityGroupSelectorTerms and spec.amiSelectorTerms", nodeClass)
	case strings.HasPrefix(code, "InvalidAMIID"):
		return fmt.Sprintf("check EC2NodeClass %q spec.amiSelectorTerms", nodeClass)
	case strings.HasPrefix(code, "InvalidSubnet"):
		return fmt.Sprintf("check EC2NodeClass %q spec.subnetSelectorTerms", nodeClass)
	case strings.HasPrefix(code, "InvalidGroup"), strings.HasPrefix(code, "InvalidSecurityGroup"):
		return fmt.Sprintf("check EC2NodeClass %q spec.securityGroupSelectorTerms", nodeClass)
	case strings.HasPrefix(code, "InvalidUserData"):
		return fmt.Sprintf("check EC2NodeClass %q spec.userData", nodeClass)
	case strings.HasPrefix(code, "InvalidIamInstanceProfile"), code == "UnauthorizedOperation", code == "AuthFailure":
		return fmt.Sprintf("check EC2NodeClass %q spec.role / spec.instanceProfile and the controller's IAM policy", nodeClass)
	default:
		return fmt.Sprintf("check EC2NodeClass %q spec against the error %s", nodeClass, code)
	}
}
