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
// family as Karpenter decides it (spec.amiFamily when set, so Custom with an
// alias term passes userData through verbatim; else the alias's family):
// MIME multipart or shell for AL2; MIME multipart, a bare NodeConfig
// document or shell for AL2023; TOML for Bottlerocket; PowerShell for
// Windows; anything for Custom. Each form is parsed with its own parser
// (ParseMIME, ParseNodeConfig, ParseBottlerocketTOML, ParsePowerShell).
// MIME trees are walked recursively: nested multiparts and message/rfc822
// parts, every
// Content-Transfer-Encoding and gzip parts, as cloud-init reads them; a part
// that cannot be decoded or read as text is denied (KX009), and so is
// userData that is itself base64 (KX010). Every leaf is then read the way
// the node will execute it (cloudinit.go, shell.go, cloudconfig.go,
// bootfiles.go): shell scripts are parsed with mvdan.cc/sh/v3/syntax (a
// script that does not parse is KX002 with its line and column) and their
// commands judged by what they do after literal variables are
// substituted, following sh -c, eval,
// here-documents, at, pipes into shells and files written to boot-executed
// paths. Each script is also run in mvdan.cc/sh/v3/interp inside a sandbox
// that executes nothing (shell_interp.go): every command is recorded and
// judged, files written are followed into units, cron tables and later
// runs, and a command karpx cannot determine is KX009 (docs/rules.md, "The
// principle"; Finding.Unresolved, --uninspectable-commands); cloud-config is walked as YAML module by module (bootcmd, runcmd,
// power_state, write_files with its encodings, users, ssh_keys), and
// #include, #part-handler and #cloud-config-archive parts are handled as
// cloud-init handles them; a "## template: jinja" part (text/jinja2) is
// parsed with gonja (github.com/nikolalohinski/gonja/v2, pinned) and
// rendered once per combination of its {% if %} branches, with instance
// data karpx cannot know marked, before each rendering is read (jinja.go). Secrets are found by gitleaks' rule set, used
// as a library (secrets.go: github.com/zricethezav/gitleaks/v8, pinned),
// in the text and in every decoded part and file, with the detector's own
// base64, hex and percent decoding for encoded fields of other formats;
// the finding names the gitleaks rule (KX004, KX006, KX012). NodeConfig's
// containerd configuration is parsed as TOML, swap is judged against
// kubelet's failSwapOn (join.go, KX013), and Bottlerocket's bootstrap and
// host container user-data is decoded and inspected like a part
// (bottlerocket_containers.go). The
// autoscaler's userData merge reads MIME with the same ParseMIME. NodePools
// are checked for the mistakes Karpenter's CRD validation lets through;
// `kubectl karpx lint` adds the CRD validation itself (KX011, package
// lint/crdschema). The rule table is returned by Rules; every rule has a
// stable ID (KX001…).
//
// Fields of Karpenter's v1 API that karpx's CRDs accept (so manifests
// decode unchanged) but karpx does not implement yet are denied, never
// accepted and ignored: the deny list in unsupported.go (KX201 EC2NodeClass
// fields, KX202 NodePool fields and values, KX203 kinds, none today),
// checked on the object's JSON by CheckUnsupported. A test walks every
// property of manifests/crds and fails when one is neither read by the
// autoscaler, webhook or plugin nor in that list.
//
// # Findings
//
// Every check reports Findings. A Finding with SeverityDeny makes the webhook
// reject the request and the linter exit with status 1; SeverityWarning is
// returned as an admission warning (at most 120 characters) or printed.
// Each Finding names the field (for example "spec.userData line 7"), what is
// wrong, and how to fix it.
//
// # Documentation
//
// docs/rules.md is generated from the rule table (Rules) and the example
// manifests in lint/examples, one flagged and one admitted per rule, which
// TestRuleExamples runs: `make docs` or `go generate ./lint` rewrites it, and
// TestRulesDocUpToDate fails when it is stale.
//
// All functions are pure and safe for concurrent use; none performs I/O
// except through the NodeClassLookup a caller passes in.
package lint

//go:generate go run ../hack/rulesdoc -o ../docs/rules.md
