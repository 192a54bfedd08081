// Package ec2api builds karpx's AWS SDK clients and names the operations
// karpx calls. New (and NewFromConfig) builds the EC2, SSM, IAM and SQS
// clients of the AWS SDK for Go v2 and returns them as a Client, which
// holds each behind an interface of the SDK's own method signatures that
// lists exactly the operations karpx calls: EC2API and SSMAPI (together
// API), IAMAPI (instance profiles) and SQSAPI (the interruption queue).
// Client has no methods of its own, so every call goes straight to the
// SDK client; what runs around a call is on that client's middleware
// stack: the client-side request budget and its metrics
// (autoscaler/aws/budget, through Config.APIOptions, on the EC2 and SSM
// clients only) and launchIssued, which marks a CreateFleet call's
// launches issued for package launchlatency. The batcher
// (autoscaler/aws/batcher) wraps an API, above the clients.
//
// test/cluster's IAM policy test reads API, IAMAPI and SQSAPI and checks
// that no other non-test package builds an SDK client, so the policy
// grants every call karpx makes. Providers under autoscaler/aws/providers
// take these interfaces, never an SDK client; tests use a fake or point a
// real Client at the loopback EC2 simulator (ec2apitest).
//
// The package also classifies AWS error codes (Code, IsNotFound,
// IsInsufficientCapacity, IsAlreadyExists, IsPermanent) so providers agree
// on what "not found", "out of capacity" and "do not retry" mean, and
// builds DescribeX filters (TagFilters, Filter).
package ec2api
