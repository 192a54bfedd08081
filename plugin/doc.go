// Package plugin is the root of karpx's kubectl plugin, installed as the
// kubectl-karpx binary and run as `kubectl karpx`.
//
// The packages below it are:
//
//   - plugin/cmd: the root command, which owns kubectl's global flags and
//     registers every subcommand;
//   - plugin/cluster: the client factory and scheme the subcommands use to
//     read Karpenter's resources, and the errors shared between them;
//   - plugin/status and the other subcommand packages: one package per
//     subcommand, each exposing a NewCmd constructor and an Options type
//     with Complete, Validate and Run.
//
// This package itself only holds the build's version stamp.
package plugin
