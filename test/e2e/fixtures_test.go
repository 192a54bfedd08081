package e2e

import (
	"fmt"
	"sort"
	"strings"
)

// The e2e tests' EC2NodeClass and NodePool manifests are built here, by
// nodeClass and nodePool, instead of by hand in every test: each test
// names only what differs from the defaults (a minimal AL2023 class whose
// subnets and security groups are found by the cluster's discovery tag,
// and a pool of that class), so a field added to the CRDs or a default
// changed in the simulator is changed once. The manifests are YAML text
// applied with kubectl (env.apply), as a user applies them, so the API
// server's CRD validation sees exactly what a user's kubectl sends (the
// bad-input test relies on it refusing some).

// nodeClass is an EC2NodeClass fixture. Only Name is required; every
// empty field takes the default named on it.
type nodeClass struct {
	// Name is metadata.name.
	Name string
	// Role is spec.role. Default "KarpenterNodeRole-" + the cluster name,
	// a role the simulator knows (ec2sim.DefaultIAMRolePatterns).
	Role string
	// AMIAlias is the one amiSelectorTerms alias. Default "al2023@latest".
	AMIAlias string
	// SubnetTags are the tags of the one subnetSelectorTerms term.
	// Default: karpenter.sh/discovery = the cluster name (every subnet of
	// the simulator's cluster).
	SubnetTags map[string]string
	// Tags are spec.tags, written in sorted key order.
	Tags map[string]string
	// UserData is spec.userData, written as a literal block.
	UserData string
}

// yaml returns the manifest for cluster (the name the simulator's
// subnets, security groups and the default role are tagged with).
func (c nodeClass) yaml(cluster string) string {
	role := orDefault(c.Role, "KarpenterNodeRole-"+cluster)
	subnets := c.SubnetTags
	if len(subnets) == 0 {
		subnets = map[string]string{"karpenter.sh/discovery": cluster}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: %s}
spec:
  role: %s
  amiSelectorTerms: [{alias: %s}]
  subnetSelectorTerms: [{tags: {%s}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: %s}}]
`, c.Name, role, orDefault(c.AMIAlias, "al2023@latest"), flowMap(subnets), cluster)
	if len(c.Tags) > 0 {
		b.WriteString("  tags:\n")
		for _, k := range sortedKeys(c.Tags) {
			fmt.Fprintf(&b, "    %s: %q\n", k, c.Tags[k])
		}
	}
	if c.UserData != "" {
		b.WriteString("  userData: |\n")
		for _, line := range strings.Split(strings.TrimRight(c.UserData, "\n"), "\n") {
			b.WriteString("    " + line + "\n")
		}
	}
	return b.String()
}

// ec2NodeClassYAML is a minimal EC2NodeClass named name for the simulator's
// cluster: AL2023 alias, subnets and security groups by the discovery tag.
func ec2NodeClassYAML(name, cluster string) string {
	return nodeClass{Name: name}.yaml(cluster)
}

// Common values of nodePool's fields.
const (
	// onDemand is the on-demand capacity type (karpenter.sh/capacity-type).
	onDemand = "on-demand"
	// neverConsolidate is a disruption block that keeps every node: no
	// consolidation, and empty nodes stay.
	neverConsolidate = "{consolidationPolicy: WhenEmpty, consolidateAfter: Never}"
)

// nodePool is a NodePool fixture. Only Name is required; every empty field
// is left out of the manifest (Karpenter's defaults apply) unless its doc
// names a default.
type nodePool struct {
	// Name is metadata.name.
	Name string
	// NodeClass names the EC2NodeClass of spec.template.spec.nodeClassRef.
	// Default: Name.
	NodeClass string
	// Labels are spec.template.metadata.labels, written in sorted key
	// order (tests' pods select their pool by one of them).
	Labels map[string]string
	// Disruption is spec.disruption as a YAML flow mapping, e.g.
	// neverConsolidate or "{consolidationPolicy: WhenEmpty,
	// consolidateAfter: 30s}".
	Disruption string
	// Limits is spec.limits as a YAML flow mapping, e.g. `{cpu: "20"}`.
	Limits string
	// Taints is spec.template.spec.taints as a YAML flow sequence.
	Taints string
	// InstanceTypes, when set, is a node.kubernetes.io/instance-type In
	// requirement.
	InstanceTypes []string
	// CapacityTypes, when set, is a karpenter.sh/capacity-type In
	// requirement (e.g. onDemand, "spot"), written after InstanceTypes.
	CapacityTypes []string
	// Requirements are more requirements, each a YAML flow mapping such as
	// "{key: kubernetes.io/arch, operator: In, values: [amd64]}", written
	// before InstanceTypes and CapacityTypes.
	Requirements []string
}

// yaml returns the manifest.
func (p nodePool) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: %s}\nspec:\n", p.Name)
	if p.Disruption != "" {
		fmt.Fprintf(&b, "  disruption: %s\n", p.Disruption)
	}
	if p.Limits != "" {
		fmt.Fprintf(&b, "  limits: %s\n", p.Limits)
	}
	b.WriteString("  template:\n")
	if len(p.Labels) > 0 {
		fmt.Fprintf(&b, "    metadata: {labels: {%s}}\n", flowMap(p.Labels))
	}
	fmt.Fprintf(&b, "    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: %s}\n", orDefault(p.NodeClass, p.Name))
	if p.Taints != "" {
		fmt.Fprintf(&b, "      taints: %s\n", p.Taints)
	}
	reqs := append([]string(nil), p.Requirements...)
	if len(p.InstanceTypes) > 0 {
		reqs = append(reqs, inRequirement("node.kubernetes.io/instance-type", p.InstanceTypes...))
	}
	if len(p.CapacityTypes) > 0 {
		reqs = append(reqs, inRequirement("karpenter.sh/capacity-type", p.CapacityTypes...))
	}
	b.WriteString("      requirements:\n")
	for _, r := range reqs {
		fmt.Fprintf(&b, "        - %s\n", r)
	}
	return b.String()
}

// inRequirement is a requirement "key In values" as a YAML flow mapping.
func inRequirement(key string, values ...string) string {
	return fmt.Sprintf("{key: %s, operator: In, values: [%s]}", key, strings.Join(values, ", "))
}

// manifests joins YAML documents into one multi-document manifest.
func manifests(docs ...string) string {
	return strings.Join(docs, "---\n")
}

// apply applies the YAML documents with kubectl, failing the test on an
// error.
func (e *env) apply(docs ...string) {
	e.t.Helper()
	if out, err := e.cluster.Kubectl(e.ctx, []byte(manifests(docs...)), "apply", "-f", "-"); err != nil {
		e.t.Fatalf("applying the test's manifests: %v\n%s", err, out)
	}
}

// flowMap writes m as the inside of a YAML flow mapping, keys in order and
// values quoted: `a: "1", b: "2"`.
func flowMap(m map[string]string) string {
	kv := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		kv = append(kv, fmt.Sprintf("%s: %q", k, m[k]))
	}
	return strings.Join(kv, ", ")
}

// orDefault returns s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
