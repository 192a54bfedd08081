// Command kubectl-karpx is the kubectl plugin run as `kubectl karpx`. All of
// its behaviour lives in github.com/karpx/karpx/plugin/cmd.
package main

import (
	"errors"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/karpx/karpx/plugin/cmd"
)

func main() {
	root := cmd.NewCmdKarpx(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := root.Execute(); err != nil {
		// Commands with their own exit status (lint: 2 when nothing was
		// checked) say so through ExitCode.
		var coded interface{ ExitCode() int }
		if errors.As(err, &coded) {
			os.Exit(coded.ExitCode())
		}
		os.Exit(1)
	}
}
