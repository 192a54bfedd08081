package lint

// Rule IDs. They are stable: a rule may change its wording but never its ID,
// and a removed rule's ID is never reused, so CI configurations that disable
// a rule by ID keep meaning the same thing.
const (
	// RuleUserDataSize (KX001, deny): userData larger than EC2's limit.
	RuleUserDataSize = "KX001"
	// RuleUserDataParse (KX002, deny): userData that does not parse in the
	// format of its AMI family.
	RuleUserDataParse = "KX002"
	// RuleUserDataNodeRestart (KX003, deny): userData that restarts or
	// stops kubelet or containerd, or reboots or powers off the node.
	RuleUserDataNodeRestart = "KX003"
	// RuleUserDataAccessKey (KX004, deny): an AWS access key ID in userData.
	RuleUserDataAccessKey = "KX004"
	// RuleUserDataSecretKey (KX005, deny): an AWS secret access key in userData.
	RuleUserDataSecretKey = "KX005"
	// RuleUserDataPrivateKey (KX006, deny): a PEM private key in userData.
	RuleUserDataPrivateKey = "KX006"
	// RuleUserDataHTTPPipe (KX007, warning): a plain-http download piped
	// to a shell or PowerShell's Invoke-Expression.
	RuleUserDataHTTPPipe = "KX007"
	// RuleUserDataOwnedSetting (KX008, warning): a Bottlerocket or
	// NodeConfig setting that the autoscaler sets itself and overrides.
	RuleUserDataOwnedSetting = "KX008"
	// RuleUserDataUninspectable (KX009, deny): a command the node will
	// run that karpx cannot determine (Finding.Unresolved), or a userData
	// part that cannot be decoded or read as text (bad base64, corrupt
	// gzip, binary, unknown transfer encoding, too deep a nesting).
	RuleUserDataUninspectable = "KX009"
	// RuleUserDataBase64 (KX010, deny): spec.userData that is itself
	// base64-encoded.
	RuleUserDataBase64 = "KX010"
	// RuleCRDSchema (KX011, deny): the object fails its CRD's OpenAPI
	// schema or CEL rules, or has unknown fields (lint only; the API
	// server itself enforces this rule in a cluster).
	RuleCRDSchema = "KX011"
	// RuleUserDataCredential (KX012, deny): a credential other than an AWS
	// key or a private key (a service token, a password assignment, an API
	// key) found by gitleaks' rule set in userData or in any text decoded
	// from it.
	RuleUserDataCredential = "KX012"
	// RuleUserDataNodeJoin (KX013, deny): userData with settings with
	// which the node cannot join: swap turned on while kubelet's
	// failSwapOn is true, or a NodeConfig containerd configuration that is
	// not valid TOML.
	RuleUserDataNodeJoin = "KX013"

	// RuleNodeClassMissing (KX101, warning): nodeClassRef names an
	// EC2NodeClass that does not exist.
	RuleNodeClassMissing = "KX101"
	// RuleRequirementsUnsatisfiable (KX102, warning): no instance type in
	// the catalogue meets the NodePool's requirements.
	RuleRequirementsUnsatisfiable = "KX102"
	// RuleMinValuesUnsatisfiable (KX103, warning): the catalogue has fewer
	// distinct values than a requirement's minValues.
	RuleMinValuesUnsatisfiable = "KX103"
	// RuleBudgetSchedule (KX104, deny): a disruption budget schedule that
	// Karpenter's cron parser rejects.
	RuleBudgetSchedule = "KX104"
	// RuleNodeClassRefGroup (KX105, warning): nodeClassRef.group carries a
	// version ("karpenter.k8s.aws/v1").
	RuleNodeClassRefGroup = "KX105"
	// RuleNegativeLimit (KX106, deny): a negative spec.limits quantity.
	RuleNegativeLimit = "KX106"
)

// Rule describes one check.
type Rule struct {
	// ID is the stable identifier, "KX001"…
	ID string `json:"id"`
	// Name is a short kebab-case name.
	Name string `json:"name"`
	// Kind is the resource kind checked: "EC2NodeClass" or "NodePool".
	Kind string `json:"kind"`
	// Severity is what the rule does when it fires.
	Severity Severity `json:"severity"`
	// Summary says what the rule catches.
	Summary string `json:"summary"`
	// Source names the document the rule or its constant comes from.
	Source string `json:"source"`
	// Why says what goes wrong on the node or in the cluster when the
	// rule's finding is ignored.
	Why string `json:"why"`
	// Fix says how to correct the object in general terms (each Finding
	// carries the specific fix).
	Fix string `json:"fix"`
}

var rules = []Rule{
	{RuleUserDataSize, "userdata-size", "EC2NodeClass", SeverityDeny,
		"spec.userData is larger than 16 KB (16,384 bytes) before base64; EC2 rejects the launch. Such userData is denied with this finding alone: no parser reads it, since none of it can run on a node.",
		"Amazon EC2 User Guide, \"Run commands when you launch an EC2 instance with user data input\": user data is limited to 16 KB in raw form, before base64 encoding.", "", ""},
	{RuleUserDataParse, "userdata-parse", "EC2NodeClass", SeverityDeny,
		"spec.userData does not parse in the format of its AMI family (MIME multipart, NodeConfig YAML, Bottlerocket TOML, PowerShell tags); the launch would fail when the autoscaler merges it.",
		"Karpenter docs, EC2NodeClasses, spec.userData (merge rules per AMI family); RFC 2045/2046 (MIME); eks nodeadm NodeConfig API node.eks.aws/v1alpha1; TOML v1.0.0; POSIX Shell Command Language and GNU Bash manual (scripts parsed with mvdan.cc/sh/v3); cloud-init docs, \"User data formats\" (cloud-config is YAML).", "", ""},
	{RuleUserDataNodeRestart, "userdata-node-agent-restart", "EC2NodeClass", SeverityDeny,
		"spec.userData stops, kills, masks, disables or restarts kubelet or containerd, or reboots, powers off, halts or kexecs the node, by any route the shell or cloud-init takes: commands (after variable substitution, sh -c, eval, here-documents, at, nohup, background jobs), systemd targets, /proc/sysrq-trigger, D-Bus, cloud-config power_state, runcmd and bootcmd, and scripts written to boot-executed paths (systemd units, cron, rc.local, /var/lib/cloud/scripts, profile.d).",
		"karpx issue P4 (NotReady flap after boot-time kubelet restarts); Karpenter docs, EC2NodeClasses, spec.userData; cloud-init docs, modules Runcmd, Bootcmd, Power State Change, Write Files, Package Update Upgrade Install (package_reboot_if_required); systemctl(1), systemd.special(7), systemd.service(5) Exec lines; crontab(5); Linux kernel docs, \"Magic SysRq key\"; org.freedesktop.login1(5).", "", ""},
	{RuleUserDataAccessKey, "userdata-aws-access-key", "EC2NodeClass", SeverityDeny,
		"spec.userData contains an AWS access key ID (AKIA…/ASIA…); userData is readable by anyone who can describe the instance or reach IMDS.",
		"AWS IAM User Guide, \"Manage access keys for IAM users\" (key ID format); Amazon EC2 User Guide, user data is not encrypted and is visible via IMDS.", "", ""},
	{RuleUserDataSecretKey, "userdata-aws-secret-key", "EC2NodeClass", SeverityDeny,
		"spec.userData contains an AWS secret access key.",
		"AWS IAM User Guide, \"Manage access keys for IAM users\"; use the node IAM role instead.", "", ""},
	{RuleUserDataPrivateKey, "userdata-private-key", "EC2NodeClass", SeverityDeny,
		"spec.userData contains a PEM private key (-----BEGIN … PRIVATE KEY-----), in the text, in a decoded write_files entry, as a users[].ssh_authorized_keys entry or as cloud-config ssh_keys *_private.",
		"RFC 7468 (PEM labels); Amazon EC2 User Guide, user data is not protected; cloud-init docs, modules Users and Groups (ssh_authorized_keys) and SSH (ssh_keys).", "", ""},
	{RuleUserDataHTTPPipe, "userdata-http-pipe-shell", "EC2NodeClass", SeverityWarning,
		"spec.userData runs a plain-http download with a shell: curl http://… | sh, bash <(curl http://…), sh -c \"$(curl http://…)\", eval or source of one, or PowerShell's Invoke-Expression; anyone on the path can run code as root on every node.",
		"OWASP, \"Download of Code Without Integrity Check\" (CWE-494).", "", ""},
	{RuleUserDataOwnedSetting, "userdata-autoscaler-owned-setting", "EC2NodeClass", SeverityWarning,
		"spec.userData sets a Bottlerocket or NodeConfig setting the autoscaler owns (cluster name, API server endpoint, CA, max-pods, node labels/taints); it will be overridden.",
		"Karpenter docs, EC2NodeClasses, spec.userData: Bottlerocket and AL2023 sections list the settings Karpenter merges over user values.", "", ""},
	{RuleUserDataUninspectable, "userdata-uninspectable-part", "EC2NodeClass", SeverityDeny,
		"A command the node will run cannot be determined (its name or script comes from the output of a program, a file karpx did not see written or an environment variable, or lies on a path karpx's interpreter did not take and is not literal; the script passes the interpreter's bounds; see The principle above; --uninspectable-commands=warn makes these warnings), or a spec.userData part cannot be decoded or read as text (undecodable base64 or quoted-printable, corrupt gzip, binary content, an unknown Content-Transfer-Encoding, multiparts nested more than 8 deep, a write_files entry whose encoding does not decode, a Bottlerocket bootstrap or host container user-data that is not base64), runs code karpx cannot read (#include and #include-once URLs, a #part-handler, a script for another interpreter such as #!/usr/bin/python3), or passes one of the bounds within which karpx inspects userData: more than 256 MIME parts, gzip-compressed documents nested more than 8 deep, more than 1 MiB decompressed, shell nesting deeper than the parser's 4,000 call frames (about 140 nested arithmetic parentheses), cloud-config whose aliases expand to more than 20,000 YAML nodes or nest more than 64 levels, Bottlerocket TOML arrays or inline tables nested more than 32 levels; a part karpx cannot inspect could hide anything.",
		"RFC 2045 section 6 (Content-Transfer-Encoding); RFC 2046 section 5.1 (nested multiparts); cloud-init documentation, \"User data formats\" (MIME multi-part, gzip compressed content, include file, part handler, cloud config archive) and module Write Files (encoding b64, gzip, gz+b64).", "", ""},
	{RuleUserDataBase64, "userdata-base64-encoded", "EC2NodeClass", SeverityDeny,
		"spec.userData is itself base64-encoded; Karpenter base64-encodes userData for EC2, so the node would receive base64 text instead of a script or settings.",
		"Karpenter docs, EC2NodeClasses, spec.userData (plain text, merged and encoded by Karpenter); Amazon EC2 API Reference, RunInstances UserData (base64 once).", "", ""},
	{RuleCRDSchema, "crd-schema", "NodePool, EC2NodeClass", SeverityDeny,
		"The object fails its CRD's OpenAPI schema or x-kubernetes-validations (CEL) rules, or has fields the CRD does not declare; the API server would reject it with the same message. Checked offline by kubectl karpx lint.",
		"manifests/crds (karpx's EC2NodeClass CRD and Karpenter's NodePool CRD); Kubernetes docs, \"Validation\" and \"Validation rules\" of CustomResourceDefinitions; kubectl --validate=strict.", "", ""},
	{RuleUserDataCredential, "userdata-credential", "EC2NodeClass", SeverityDeny,
		"spec.userData contains a credential that gitleaks' rule set recognises (GitHub, GitLab, Slack, Docker Hub, npm, Datadog, Azure, GCP and some 200 other services' tokens, and generic key, token, secret and password assignments with high entropy), in the text or in anything decoded from it: base64 userData, MIME transfer encodings, gzip, write_files encodings, Bottlerocket bootstrap and host container user-data, and base64, hex or percent-encoded substrings such as a kubeconfig's fields or a TOML value (gitleaks' own two decoding passes, on lines holding a base64 run of 20 characters with upper and lower case and digits, 32 hex digits or a percent escape; its generic key rule reads the lines holding its keywords and the decoded parts, not its decoded substrings). The finding names the gitleaks rule. AWS access key IDs and private keys found by the same rule set are reported as KX004 and KX006. Placeholders (EXAMPLE, changeme, <your-token>, ${VAR}, a value of at most three distinct characters) and public keys or certificates are not reported.",
		"gitleaks v8.30.1, config/gitleaks.toml (github.com/zricethezav/gitleaks/v8, MIT); Amazon EC2 User Guide, user data is not encrypted and is visible via IMDS and DescribeInstanceAttribute.", "", ""},
	{RuleUserDataNodeJoin, "userdata-node-cannot-join", "EC2NodeClass", SeverityDeny,
		"spec.userData has settings with which the node cannot join the cluster: swap turned on (swapon, systemctl start of a .swap unit, cloud-config swap with a size or a mounts swap entry, by any route the shell interpreter follows) on AL2 or AL2023 while kubelet's failSwapOn is true, its default (no failSwapOn: false in the NodeConfig's spec.kubelet.config and no --fail-swap-on=false anywhere in the userData); or a NodeConfig spec.containerd.config that is not valid TOML (parsed with github.com/BurntSushi/toml, nesting bounded as for Bottlerocket) or not a string.",
		"Kubernetes docs, kubelet command-line reference (--fail-swap-on, default true) and KubeletConfiguration (failSwapOn, memorySwap); eks nodeadm API reference, ContainerdOptions.config (inline TOML merged with the defaults); containerd docs, config.toml (TOML v1.0.0); cloud-init docs, module Mounts (swap, mounts); systemd.swap(5).", "", ""},
	{RuleNodeClassMissing, "nodepool-nodeclass-missing", "NodePool", SeverityWarning,
		"spec.template.spec.nodeClassRef names an EC2NodeClass that does not exist; no node is launched for the NodePool until it does.",
		"Karpenter docs, NodePools, spec.template.spec.nodeClassRef.", "", ""},
	{RuleRequirementsUnsatisfiable, "nodepool-requirements-unsatisfiable", "NodePool", SeverityWarning,
		"No instance type in karpx's catalogue (1,363 EC2 types) meets spec.template.spec.requirements; the NodePool can never launch a node.",
		"Karpenter docs, NodePools, spec.template.spec.requirements and well-known labels; karpx catalogue (package catalog).", "", ""},
	{RuleMinValuesUnsatisfiable, "nodepool-minvalues-unsatisfiable", "NodePool", SeverityWarning,
		"A requirement's minValues is larger than the number of distinct values the catalogue offers under the NodePool's requirements; every launch fails the minValues check.",
		"Karpenter docs, NodePools, spec.template.spec.requirements minValues.", "", ""},
	{RuleBudgetSchedule, "nodepool-budget-schedule", "NodePool", SeverityDeny,
		"A spec.disruption.budgets[].schedule passes the CRD's pattern but not the cron parser Karpenter uses; Karpenter then blocks all disruption for the NodePool.",
		"Karpenter docs, Disruption budgets (schedule uses cron syntax, UTC); sigs.k8s.io/karpenter pkg/apis/v1 Budget.IsActive (robfig/cron/v3 ParseStandard).", "", ""},
	{RuleNodeClassRefGroup, "nodepool-nodeclassref-group", "NodePool", SeverityWarning,
		"spec.template.spec.nodeClassRef.group contains a version (\"karpenter.k8s.aws/v1\"); the NodePool CRD requires a bare API group.",
		"Karpenter NodePool CRD, nodeClassRef.group pattern ^[^/]*$.", "", ""},
	{RuleNegativeLimit, "nodepool-negative-limit", "NodePool", SeverityDeny,
		"A spec.limits quantity is negative; the CRD's pattern allows a sign, but the NodePool is then over its limit from the start and never launches a node.",
		"Karpenter docs, NodePools, spec.limits (a NodePool stops provisioning once its nodes' resources reach the limits).", "", ""},
}

// ruleDocs holds each rule's Why and Fix (docs/rules.md, `kubectl karpx
// lint --help`).
var ruleDocs = map[string][2]string{
	RuleUserDataSize: {"EC2 rejects RunInstances and CreateFleet with userData over 16 KB, so every launch for the EC2NodeClass fails and the NodePool retries until the API budget is gone (karpx issue P1).",
		"Keep userData small: fetch large files at boot from S3 or SSM with the node role."},
	RuleUserDataParse: {"Karpenter merges its bootstrap into userData by format; text it cannot parse fails every launch, and a script or cloud-config the node cannot parse stops at the error, so the node may never join.",
		"Write userData in its AMI family's format and check scripts with bash -n; the finding names the line and column."},
	RuleUserDataNodeRestart: {"A node that restarts kubelet or containerd, or reboots, after it registers goes NotReady while pods are already bound to it; the autoscaler sees it as lost capacity and launches another node (karpx issue P4).",
		"Configure kubelet through spec.kubelet or a NodeConfig and containerd through drop-in files written before the bootstrap starts them, and let the autoscaler replace nodes instead of rebooting them."},
	RuleUserDataAccessKey: {"userData is readable by anyone who can call DescribeInstanceAttribute or reach IMDS from a pod; a long-term key there is a leaked key.",
		"Remove the key, rotate it, and grant access through the node IAM role (spec.role)."},
	RuleUserDataSecretKey: {"Same exposure as an access key ID: the secret is readable through IMDS and the EC2 API.",
		"Remove the secret, rotate it, and use the node IAM role."},
	RuleUserDataPrivateKey: {"A private key in userData (a file, an ssh_authorized_keys entry, an SSH host key) is readable through IMDS and the EC2 API by anyone with access to the instance or its API.",
		"Fetch keys at boot from Secrets Manager or SSM with the node role; ssh_authorized_keys takes public keys."},
	RuleUserDataHTTPPipe: {"A plain-http download run as root lets anyone on the network path run code on every node.",
		"Download over https, verify a checksum or signature, then run the file."},
	RuleUserDataOwnedSetting: {"The autoscaler writes these settings itself for every node; the value in userData is silently replaced, which surprises whoever set it.",
		"Set labels and taints in the NodePool, kubelet settings in spec.kubelet, and drop the cluster settings from userData."},
	RuleUserDataUninspectable: {"A part karpx cannot read (an undecodable encoding, a URL cloud-init downloads with #include, a Python #part-handler or script) can do anything the rules deny, unseen.",
		"Put the commands in spec.userData itself as shell or cloud-config, in a text encoding."},
	RuleUserDataBase64: {"Karpenter base64-encodes userData for EC2; encoded text is encoded twice and reaches the node as an unreadable blob that cloud-init ignores.",
		"Put the decoded text in spec.userData."},
	RuleUserDataCredential: {"userData is readable by anyone who can call DescribeInstanceAttribute or reach IMDS from a pod; a token there is a leaked token, for every service it grants.",
		"Remove the credential, rotate it, and fetch it at boot from Secrets Manager or SSM Parameter Store with the node role."},
	RuleUserDataNodeJoin: {"kubelet exits at start when swap is on and failSwapOn is true, and nodeadm stops when it cannot merge the containerd configuration; either way the instance runs and is paid for but never becomes a Node, and the autoscaler only replaces it after the registration timeout (15 minutes in Karpenter).",
		"Leave swap off, or set failSwapOn: false with memorySwap.swapBehavior: LimitedSwap in the NodeConfig; write spec.containerd.config as valid TOML."},
	RuleCRDSchema: {"The API server would reject the object with the same message; lint reports it before kubectl apply does.",
		"Correct the field as the message says; kubectl explain nodepool.spec shows the schema."},
	RuleNodeClassMissing: {"A NodePool whose EC2NodeClass does not exist launches nothing, and pods stay pending without an obvious reason.",
		"Create the EC2NodeClass or correct spec.template.spec.nodeClassRef.name."},
	RuleRequirementsUnsatisfiable: {"No instance type can satisfy the NodePool, so every pod that only it could serve stays pending.",
		"Loosen spec.template.spec.requirements; kubectl karpx explain pod shows which requirement excludes what."},
	RuleMinValuesUnsatisfiable: {"Karpenter refuses every launch that cannot offer minValues distinct values, so the NodePool never launches.",
		"Lower minValues or widen the requirement's values."},
	RuleBudgetSchedule: {"Karpenter cannot parse the schedule at run time and treats the budget as blocking, so the NodePool is never consolidated or drifted.",
		"Use a five-field cron expression (or @daily, @hourly, …) in UTC."},
	RuleNodeClassRefGroup: {"The CRD requires a bare API group; Karpenter's own CRD rejects a group with a version.",
		"Set nodeClassRef.group to karpenter.k8s.aws."},
	RuleNegativeLimit: {"A negative limit is exceeded from the start, so the NodePool never launches a node.",
		"Use a non-negative quantity, or remove the limit."},
}

func init() {
	for i := range rules {
		d := ruleDocs[rules[i].ID]
		rules[i].Why, rules[i].Fix = d[0], d[1]
	}
}

// Rules returns the rule table in ID order. The slice is a fresh copy.
func Rules() []Rule {
	out := make([]Rule, len(rules))
	copy(out, rules)
	return out
}

// RuleByID returns the rule with the given ID and whether it exists.
func RuleByID(id string) (Rule, bool) {
	for _, r := range rules {
		if r.ID == id {
			return r, true
		}
	}
	return Rule{}, false
}

func severityOf(id string) Severity {
	r, _ := RuleByID(id)
	return r.Severity
}
