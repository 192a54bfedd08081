// Package docs has no code: its tests keep README.md and docs/*.md from
// drifting away from the code they describe. Every `--flag` the docs name
// is a real flag, checked against the flag sets the commands themselves
// build (operator.Options.AddFlags for karpx-controller,
// webhook.CommandFlags for karpx-webhook, ec2sim.CommandFlags for ec2sim,
// the cobra tree of plugin/cmd for kubectl karpx); every
// `make <target> VAR=value` names a target and a variable of the Makefile;
// every ./package of a `go test` or `go run` command exists. The layout
// table's paths are checked in test/architecture.
package docs
