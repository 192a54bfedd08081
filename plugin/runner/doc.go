// Package runner runs a kubectl karpx subcommand's options in kubectl's
// order: Complete (read the flags and build clients), Validate (check
// them), Run. It owns that order only: it must not import a subcommand's
// package.
package runner
