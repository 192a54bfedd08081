// Package lint implements `kubectl karpx lint`, the offline checker for
// Karpenter NodePool (karpenter.sh/v1) and EC2NodeClass (karpenter.k8s.aws/v1)
// manifests.
//
// It runs exactly the rules the karpx admission webhook enforces (package
// github.com/karpx/karpx/lint), without a cluster: nodeClassRef targets are
// looked up among the EC2NodeClasses in the files given. It reads files,
// directories (their *.yaml, *.yml and *.json files, recursively with -R)
// or standard input ("-"), prints a table with one row per finding (-o wide
// adds the rule, field and fix columns), a karpx.io/v1alpha1 LintReport
// with -o json or yaml for CI, or the objects with findings with -o name,
// and fails with a *DeniedError — which the plugin root
// turns into exit status 1 — when any finding would make the webhook deny
// the object.
package lint
