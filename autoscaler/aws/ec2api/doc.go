// Package ec2api is where karpx's AWS clients are built and named: it
// builds the EC2, SSM, IAM and SQS SDK clients (New, NewFromConfig) and
// exposes them through narrow interfaces that list exactly the operations
// karpx calls: API (EC2 and SSM), IAMAPI (instance profiles) and SQSAPI
// (the interruption queue). Client's methods pass each call to the SDK
// client unchanged; the one addition is CreateFleet marking the launch
// issued for package launchlatency. test/cluster's IAM policy test reads
// these interfaces, and checks that no other non-test package builds an
// SDK client, so the policy grants every call karpx makes.
//
// Every provider under autoscaler/aws/providers takes one of these
// interfaces, never an SDK client, so what sits between the callers and
// AWS is added once, below every caller: the batcher
// (autoscaler/aws/batcher) is a wrapper that implements API, and the
// client-side budget and request metrics (autoscaler/aws/budget) go on the
// EC2 and SSM clients' middleware stacks (Config.APIOptions). Tests use a
// fake or point a real Client at the loopback EC2 simulator (ec2apitest).
//
// The package also classifies AWS error codes (Code, IsNotFound,
// IsInsufficientCapacity, IsAlreadyExists, IsPermanent) so providers agree
// on what "not found", "out of capacity" and "do not retry" mean, and
// builds DescribeX filters (TagFilters, Filter).
package ec2api
