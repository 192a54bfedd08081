package cmd

import (
	"errors"
	"strings"

	"github.com/karpx/karpx/plugin/explain"
	"github.com/karpx/karpx/plugin/throttle"
)

// Exit statuses of kubectl-karpx, as ExitCode maps errors to them.
const (
	// ExitOK: the command did what was asked.
	ExitOK = 0
	// ExitError: the command failed (API error, missing CRDs, bad
	// kubeconfig, …); the message says why.
	ExitError = 1
	// ExitUsage: the command line was wrong (unknown command or flag, bad
	// arguments or flag values); nothing was read from the cluster.
	ExitUsage = 2
	// ExitNegative: the command worked and the answer is "no": `explain
	// pod` found no NodePool that can launch a node for the pod, or the
	// part asked for does not exist on this cluster (`throttle` on a
	// cluster without the karpx controller, e.g. one running upstream
	// Karpenter).
	ExitNegative = 3
)

// usageError marks command-line mistakes found by the root command (flag
// parsing).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// ExitCode returns the exit status for the error Execute returned.
func ExitCode(err error) int {
	var (
		usage         usageError
		explainUsage  explain.UsageError
		unschedulable *explain.UnschedulableError
		noController  *throttle.ServiceNotFoundError
	)
	// A command with its own exit status (lint: 2 when nothing was
	// checked) says so through ExitCode.
	var coded interface{ ExitCode() int }
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &coded):
		return coded.ExitCode()
	case errors.As(err, &usage), errors.As(err, &explainUsage),
		// cobra's own argument errors carry no type.
		strings.HasPrefix(err.Error(), "unknown command "), strings.HasPrefix(err.Error(), "accepts "),
		strings.HasPrefix(err.Error(), "unknown flag"), strings.HasPrefix(err.Error(), "invalid argument "):
		return ExitUsage
	case errors.As(err, &unschedulable), errors.As(err, &noController):
		return ExitNegative
	}
	return ExitError
}
