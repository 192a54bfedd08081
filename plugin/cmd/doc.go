// Package cmd assembles `kubectl karpx`: the root command, which binds
// kubectl's global flags (genericclioptions.ConfigFlags) and registers every
// subcommand, and the small `version` subcommand.
//
// Each other subcommand lives in its own package under plugin/ (status,
// lint, …) and exposes a constructor returning a *cobra.Command, with the
// command's logic in an Options type whose Complete, Validate and Run can be
// tested without a shell. To add one:
//
//  1. create plugin/NAME with doc.go and a NewCmd constructor, taking a
//     cluster.Factory if the command reads the cluster
//     (func NewCmd(f cluster.Factory, streams genericiooptions.IOStreams))
//     or only the streams if it does not;
//  2. add it to the AddCommand call in newCmdKarpx, e.g.
//     lint.NewCmd(streams).
//
// The root names itself "kubectl karpx" in help and usage lines, prints
// errors as kubectl does ("error: …" on stderr), and keeps cobra's hidden
// __complete command, which kubectl_complete-karpx calls for shell
// completion.
package cmd
