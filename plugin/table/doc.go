// Package table prints the kubectl karpx subcommands' tables as kubectl get
// prints its own (cli-runtime's table printer: upper-case headers,
// priority-1 columns only with -o wide, --no-headers), defines once the
// columns several tables share (a NodeClaim's pool, instance type, Node and
// age; a budget bucket's counters; a lint finding's rule, field and fix),
// and formats their cells the same way everywhere (<none>, -, one line,
// kubectl's ages).
//
// It owns presentation only: it must not read the cluster or import a
// subcommand's package.
package table
