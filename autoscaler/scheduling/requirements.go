package scheduling

import "github.com/karpx/karpx/requirements"

// requirement and requirementSet are the one implementation of node
// requirement matching in karpx (package requirements), shared with the
// AWS cloud provider.
type (
	requirement    = requirements.Requirement
	requirementSet = requirements.Set
)

var (
	newRequirement     = requirements.New
	describeExpression = requirements.DescribeExpression
)
