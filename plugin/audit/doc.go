// Package audit implements `kubectl karpx audit`: the karpx admission rules
// (package github.com/karpx/karpx/lint) run over every live NodePool
// (karpenter.sh/v1) and EC2NodeClass (karpenter.k8s.aws/v1) of a cluster,
// and optionally over manifests given with -f.
//
// It needs only the CRDs' objects and read access to them (list nodepools
// and ec2nodeclasses), so it works on a cluster run by upstream Karpenter as
// well as by karpx. Findings name the rule, the object and the field; output
// is a table, an AuditReport (karpx.io/v1alpha1) with -o json or yaml, or a
// SARIF 2.1.0 log with -o sarif. Exit status: 0, or 1 when a finding reaches
// --fail-on (deny by default) or -f input cannot be read, or 2 when there is
// nothing to check or a flag is wrong. Options follows the plugin's
// Complete/Validate/Run pattern.
package audit
