// Package architecture has no code: its tests check the module's shape
// against what its docs say. The import graph against the layering rules
// (imports_test.go, each rule with its reason): the shipped binaries never
// link the EC2 simulator, test harnesses or test helpers, scheduling never
// reaches the AWS SDK, the AWS code (autoscaler/aws) or controllers, and
// the AWS cloud provider, providers, EC2 client and caches never import
// controllers; a new package under a covered tree
// is checked without an edit here. And every path in README.md's layout
// table exists (readme_test.go).
package architecture
