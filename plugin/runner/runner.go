package runner

import (
	"context"

	"github.com/spf13/cobra"
)

// Options are a subcommand's inputs in kubectl's convention.
type Options interface {
	// Complete fills in what the parsed flags and args imply.
	Complete(cmd *cobra.Command, args []string) error
	// Validate checks the completed options; its error is a usage mistake.
	Validate() error
	// Run does the work.
	Run(ctx context.Context) error
}

// RunE returns a cobra RunE that calls o's Complete, Validate and Run in
// that order with cmd's context, and returns the first error.
func RunE(o Options) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
}
