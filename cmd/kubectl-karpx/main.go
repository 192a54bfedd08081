// Command kubectl-karpx is the kubectl plugin run as `kubectl karpx`. All of
// its behaviour lives in github.com/karpx/karpx/plugin/cmd.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/karpx/karpx/plugin/cmd"
)

func main() {
	root := cmd.NewCmdKarpx(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	// Errors were printed by Execute; the status says what kind they were
	// (cmd.ExitUsage, cmd.ExitNegative, a command's own ExitCode, …).
	os.Exit(cmd.ExitCode(root.Execute()))
}
