// Package ec2api is the single place where karpx talks to AWS: it builds the
// EC2, SSM and IAM SDK clients and exposes them through API (EC2 and SSM)
// and IAMAPI (instance profiles), narrow interfaces that name exactly the
// operations karpx uses.
//
// Every provider under autoscaler/aws/providers takes an API, never an SDK
// client, so batching can be added once, as a wrapper that implements API,
// below every caller; client-side rate limiting and request metrics go on
// the SDK clients' middleware stacks (Config.APIOptions). Tests
// substitute a fake or point a real Client at the loopback EC2 simulator.
//
// The package also classifies AWS error codes (Code, IsNotFound,
// IsInsufficientCapacity, IsAlreadyExists, IsPermanent) so providers agree on
// what "not found", "out of capacity" and "do not retry" mean.
package ec2api
