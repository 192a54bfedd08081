// Package lint holds karpx's admission rules for Karpenter's NodePool
// (karpenter.sh/v1) and EC2NodeClass (karpenter.k8s.aws/v1) resources.
//
// The same rules run in two places: the karpx admission webhook
// (package github.com/karpx/karpx/webhook), which denies or warns on every
// create and update, and the offline `kubectl karpx lint` command
// (package github.com/karpx/karpx/plugin/lint), which checks manifests
// before they reach a cluster. Keeping them in one package guarantees that a
// manifest the linter passes is a manifest the webhook admits.
//
// # What is checked
//
// EC2NodeClass spec.userData is parsed in the format implied by the AMI
// family (an amiSelectorTerms alias such as "al2023@latest" first, else
// spec.amiFamily): MIME multipart or shell for AL2; MIME multipart, a bare
// NodeConfig document or shell for AL2023; TOML for Bottlerocket; PowerShell
// for Windows; anything for Custom. Each form is parsed with its own parser
// (ParseMIME, ParseNodeConfig, ParseBottlerocketTOML, ParsePowerShell), and
// the content is then scanned for unsafe commands and secrets. NodePools are
// checked for the mistakes Karpenter's CRD validation lets through. The rule
// table is returned by Rules; every rule has a stable ID (KX001…).
//
// # Findings
//
// Every check reports Findings. A Finding with SeverityDeny makes the webhook
// reject the request and the linter exit with status 1; SeverityWarning is
// returned as an admission warning (at most 120 characters) or printed.
// Each Finding names the field (for example "spec.userData line 7"), what is
// wrong, and how to fix it.
//
// All functions are pure and safe for concurrent use; none performs I/O
// except through the NodeClassLookup a caller passes in.
package lint
