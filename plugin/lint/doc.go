// Package lint implements `kubectl karpx lint`, the offline checker for
// Karpenter NodePool (karpenter.sh/v1) and EC2NodeClass (karpenter.k8s.aws/v1)
// manifests.
//
// It runs exactly the rules the karpx admission webhook enforces (package
// github.com/karpx/karpx/lint), without a cluster: nodeClassRef targets are
// looked up among the EC2NodeClasses in the files given. It reads files,
// directories (their *.yaml, *.yml and *.json files, recursively with -R)
// or standard input ("-"), prints one line per finding, or a JSON report
// with -o json for CI, and fails with a *DeniedError — which the plugin root
// turns into exit status 1 — when any finding would make the webhook deny
// the object.
package lint
