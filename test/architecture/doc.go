// Package architecture has no code: its tests check the module's shape
// against what its docs say. The import graph against the layering rules
// (imports_test.go, each rule with its reason and a control that plants a
// violation of it in a made-up graph): the shipped binaries never link the
// EC2 simulator, test harnesses or test helpers; kubectl-karpx links no
// controller and no AWS SDK service client (also checked on
// `go list -deps ./cmd/kubectl-karpx`); no controller depends on another
// controller (autoscaler/controllers and autoscaler/aws/controllers, but
// for its own subpackages) or on the webhook; the cloud-neutral
// controllers reach no AWS code or SDK; scheduling never reaches the
// AWS SDK, the AWS code (autoscaler/aws) or controllers; the seam
// (autoscaler/cloudprovider) imports no other karpx package and state
// (autoscaler/state) no cloud and no controller; the AWS cloud provider,
// providers, EC2 client and caches never import controllers, and the
// providers not the seam (but for the listed exceptions); a new package
// under a covered tree is checked without an edit here. Production code
// under autoscaler/ reads time through an injected k8s.io/utils/clock, the
// few wall-clock uses listed with their reasons (clock_test.go). And every
// path in README.md's layout table exists, and its rows for autoscaler/
// name every package under autoscaler/ (readme_test.go).
package architecture
