package lint

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// NodeConfig API identity accepted by nodeadm, the AL2023 node bootstrapper
// (awslabs/amazon-eks-ami, nodeadm API reference: apiVersion
// node.eks.aws/v1alpha1, kind NodeConfig).
const (
	NodeConfigAPIVersion = "node.eks.aws/v1alpha1"
	NodeConfigKind       = "NodeConfig"
)

// NodeConfigDocument is one parsed NodeConfig YAML document.
type NodeConfigDocument struct {
	// Root is the document's top-level mapping node; node lines are
	// relative to the parsed text (1-based).
	Root *yaml.Node
	// Line is the 1-based line of the document start within the parsed text.
	Line int
}

// ParseNodeConfig parses text as one or more YAML documents, each of which
// must be a mapping with apiVersion node.eks.aws/v1alpha1 and kind
// NodeConfig. Empty documents (only comments) are skipped, but at least one
// NodeConfig is required. Errors are *ParseError with the line relative to
// text.
func ParseNodeConfig(text string) ([]NodeConfigDocument, error) {
	dec := yaml.NewDecoder(strings.NewReader(text))
	var docs []NodeConfigDocument
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, yamlParseError(err)
		}
		if n.Kind != yaml.DocumentNode || len(n.Content) == 0 {
			continue
		}
		root := n.Content[0]
		if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
			continue
		}
		if root.Kind != yaml.MappingNode {
			return nil, &ParseError{Format: "NodeConfig", Line: root.Line, Msg: "document is not a YAML mapping; a NodeConfig starts with 'apiVersion: " + NodeConfigAPIVersion + "'"}
		}
		av, avLine := scalarAt(root, "apiVersion")
		k, kLine := scalarAt(root, "kind")
		switch {
		case av == "":
			return nil, &ParseError{Format: "NodeConfig", Line: root.Line, Msg: "no apiVersion; set 'apiVersion: " + NodeConfigAPIVersion + "'"}
		case av != NodeConfigAPIVersion:
			return nil, &ParseError{Format: "NodeConfig", Line: avLine, Msg: fmt.Sprintf("apiVersion is %q; nodeadm reads %q", av, NodeConfigAPIVersion)}
		case k != NodeConfigKind:
			line := kLine
			if line == 0 {
				line = root.Line
			}
			return nil, &ParseError{Format: "NodeConfig", Line: line, Msg: fmt.Sprintf("kind is %q; want %q", k, NodeConfigKind)}
		}
		if spec := mapValue(root, "spec"); spec != nil && spec.Kind != yaml.MappingNode && spec.Tag != "!!null" {
			return nil, &ParseError{Format: "NodeConfig", Line: spec.Line, Msg: "spec is not a mapping"}
		}
		docs = append(docs, NodeConfigDocument{Root: root, Line: root.Line})
	}
	if len(docs) == 0 {
		return nil, &ParseError{Format: "NodeConfig", Line: 0, Msg: "no NodeConfig document"}
	}
	return docs, nil
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// yamlParseError turns a yaml.v3 error ("yaml: line 3: mapping values are
// not allowed in this context") into a *ParseError.
func yamlParseError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = strings.TrimSpace(strings.TrimPrefix(strings.Replace(msg, m[0], "", 1), ":"))
	}
	return &ParseError{Format: "NodeConfig", Line: line, Msg: "YAML: " + msg}
}

// mapValue returns the value node for key in mapping m, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// mapKey returns the key node for key in mapping m, or nil.
func mapKey(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i]
		}
	}
	return nil
}

func scalarAt(m *yaml.Node, key string) (string, int) {
	v := mapValue(m, key)
	if v == nil || v.Kind != yaml.ScalarNode {
		return "", 0
	}
	return v.Value, v.Line
}

// ownedSetting is a setting the autoscaler writes itself.
type ownedSetting struct {
	path []string // key path
	what string   // what it is, for the message
}

// nodeConfigOwned lists the NodeConfig fields Karpenter's AL2023 bootstrap
// writes in its own NodeConfig, which nodeadm merges after the user's (Karpenter
// docs, EC2NodeClasses, spec.userData, AL2023: "Karpenter will merge the
// cluster details, kubelet configuration and flags").
var nodeConfigOwned = []ownedSetting{
	{[]string{"spec", "cluster", "name"}, "cluster name"},
	{[]string{"spec", "cluster", "apiServerEndpoint"}, "API server endpoint"},
	{[]string{"spec", "cluster", "certificateAuthority"}, "cluster CA"},
	{[]string{"spec", "cluster", "cidr"}, "service CIDR"},
	{[]string{"spec", "kubelet", "config", "maxPods"}, "max-pods"},
	{[]string{"spec", "kubelet", "config", "registerWithTaints"}, "node taints"},
}

// kubelet flags Karpenter passes itself.
var ownedKubeletFlags = map[string]string{
	"--node-labels":          "node labels",
	"--register-with-taints": "node taints",
	"--max-pods":             "max-pods",
}

// nodeConfigOwnedFindings reports owned settings in docs; lineOffset is
// added to node lines to map them into spec.userData.
func nodeConfigOwnedFindings(docs []NodeConfigDocument, lineOffset int) []Finding {
	var out []Finding
	for _, d := range docs {
		for _, o := range nodeConfigOwned {
			n, k := d.Root, (*yaml.Node)(nil)
			for _, p := range o.path {
				k = mapKey(n, p)
				n = mapValue(n, p)
				if n == nil {
					break
				}
			}
			if n != nil && k != nil {
				out = append(out, ownedFinding(strings.Join(o.path, "."), o.what, k.Line+lineOffset))
			}
		}
		flags := mapValue(mapValue(mapValue(d.Root, "spec"), "kubelet"), "flags")
		if flags != nil && flags.Kind == yaml.SequenceNode {
			for _, f := range flags.Content {
				for flag, what := range ownedKubeletFlags {
					if f.Kind == yaml.ScalarNode && strings.HasPrefix(strings.TrimSpace(f.Value), flag) {
						out = append(out, ownedFinding("spec.kubelet.flags "+flag, what, f.Line+lineOffset))
					}
				}
			}
		}
	}
	return out
}

func ownedFinding(setting, what string, line int) Finding {
	return Finding{
		RuleID:   RuleUserDataOwnedSetting,
		Severity: severityOf(RuleUserDataOwnedSetting),
		Field:    "spec.userData",
		Line:     line,
		Message:  fmt.Sprintf("%s (%s) is set by the autoscaler and will be overridden", setting, what),
		Fix:      "remove it; set it through the EC2NodeClass (spec.kubelet) or NodePool (labels, taints) instead",
	}
}
