// Package output gives the kubectl karpx subcommands kubectl's -o flag:
// the default table, "wide" for extra columns, and cli-runtime's json,
// yaml and name printers, with kubectl's error for a format a command does
// not support. karpx's own reports (lint results, the EC2 API budget, the
// capacity cache, versions) print as objects of API version
// karpx.io/v1alpha1, a plugin output format rather than a served API.
package output
