package ec2api

import (
	"errors"
	"strings"

	"github.com/aws/smithy-go"
)

// Error codes karpx branches on. Sources: the EC2 API error-code reference
// (docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html) and
// the codes Karpenter's AWS provider treats as unfulfillable capacity
// (aws/karpenter-provider-aws pkg/errors).
const (
	// CodeInsufficientInstanceCapacity is returned when a zone has no
	// capacity for an instance type and purchase option.
	CodeInsufficientInstanceCapacity = "InsufficientInstanceCapacity"
	// CodeInstanceNotFound is returned for an unknown or long-gone instance ID.
	CodeInstanceNotFound = "InvalidInstanceID.NotFound"
	// CodeInstanceIDMalformed is returned for a string that is not an
	// instance ID.
	CodeInstanceIDMalformed = "InvalidInstanceID.Malformed"
	// CodeLaunchTemplateNameAlreadyExists is returned by CreateLaunchTemplate
	// when a template of that name exists; karpx names templates by content,
	// so this means "already created", which is success.
	CodeLaunchTemplateNameAlreadyExists = "InvalidLaunchTemplateName.AlreadyExistsException"
	// CodeLaunchTemplateNameNotFound is returned by DescribeLaunchTemplates
	// for an unknown template name.
	CodeLaunchTemplateNameNotFound = "InvalidLaunchTemplateName.NotFoundException"
	// CodeParameterNotFound is SSM's code for a missing parameter.
	CodeParameterNotFound = "ParameterNotFound"
	// CodeNoSuchEntity is IAM's code for a missing instance profile or
	// role (IAM API Reference, GetInstanceProfile, AddRoleToInstanceProfile).
	CodeNoSuchEntity = "NoSuchEntity"
	// CodeEntityAlreadyExists is IAM's code for creating an instance
	// profile whose name is taken.
	CodeEntityAlreadyExists = "EntityAlreadyExists"
	// CodeAccessDenied is IAM's code for a call the caller's policy does
	// not allow.
	CodeAccessDenied = "AccessDenied"
)

// insufficientCapacityCodes mean "this offering cannot be fulfilled now":
// retrying the same (instance type, zone, capacity type) will fail again, but
// another offering may succeed.
var insufficientCapacityCodes = map[string]bool{
	CodeInsufficientInstanceCapacity:    true,
	"InsufficientFreeAddressesInSubnet": true,
	"MaxSpotInstanceCountExceeded":      true,
	"ReservationCapacityExceeded":       true,
	"UnfulfillableCapacity":             true,
	"Unsupported":                       true,
	"VcpuLimitExceeded":                 true,
}

// permanentPrefixes are code prefixes for requests EC2 rejects as invalid or
// forbidden: retrying without changing the EC2NodeClass or IAM cannot help.
var permanentPrefixes = []string{
	"AccessDenied",
	"AuthFailure",
	"Blocked",
	"InvalidAMIID.",
	"InvalidBlockDeviceMapping",
	"InvalidGroup.",
	"InvalidIamInstanceProfile",
	"InvalidInput",
	"InvalidKeyPair",
	"InvalidLaunchTemplate",
	"InvalidParameter",
	"InvalidSubnetID.",
	"InvalidUserData",
	"MissingParameter",
	"OptInRequired",
	"PendingVerification",
	"UnauthorizedOperation",
}

// Code returns the AWS error code of err ("InvalidInstanceID.NotFound"), or
// "" when err is not an AWS API error.
func Code(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// IsNotFound reports whether code names a missing resource
// ("….NotFound", "….NotFoundException", SSM's "ParameterNotFound" or IAM's
// "NoSuchEntity").
func IsNotFound(code string) bool {
	return strings.HasSuffix(code, ".NotFound") || strings.HasSuffix(code, "NotFoundException") || code == CodeParameterNotFound ||
		code == CodeNoSuchEntity
}

// IsInsufficientCapacity reports whether code means that an offering is out
// of capacity (or quota) and another offering should be tried.
func IsInsufficientCapacity(code string) bool { return insufficientCapacityCodes[code] }

// IsAlreadyExists reports whether code means the resource being created
// already exists (a launch template, or an IAM instance profile).
func IsAlreadyExists(code string) bool {
	return code == CodeLaunchTemplateNameAlreadyExists || code == CodeEntityAlreadyExists
}

// IsPermanent reports whether code means EC2 rejected the request itself
// (invalid parameter, unknown AMI, unauthorized). Throttling
// (RequestLimitExceeded), 5xx (InternalError, Unavailable) and unknown codes
// are not permanent: callers retry them.
func IsPermanent(code string) bool {
	for _, p := range permanentPrefixes {
		if strings.HasPrefix(code, p) {
			return true
		}
	}
	return false
}
