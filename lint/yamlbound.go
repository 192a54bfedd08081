package lint

import (
	"fmt"

	yaml "go.yaml.in/yaml/v3"
)

// This file resolves YAML anchors, aliases and merge keys in cloud-config
// before the rules walk it, within bounds. cloud-init loads cloud-config
// with PyYAML's safe loader, which expands every alias and applies "<<"
// merge keys (YAML 1.1 merge type), so "runcmd: *cmds" runs the anchored
// list; yaml.v3's Node tree keeps aliases as references, which the rules
// did not follow. Expanding aliases is where YAML's cost hides: a few
// lines of aliases to aliases ("billion laughs") expand exponentially, so
// the expansion counts the nodes it builds.

// MaxYAMLNodes bounds the nodes a cloud-config (or #cloud-config-archive)
// document may have once its aliases are expanded: 20,000. A cloud-config
// that bootstraps a node has tens to hundreds; the bound lets a
// decompressed cloud-config of MaxDecodedBytes with ordinary structure
// through and stops an alias bomb after 20,000 copies. More is refused
// (KX009).
const MaxYAMLNodes = 20000

// MaxYAMLDepth bounds how deeply a cloud-config's collections may nest:
// 64 levels. cloud-config modules nest three or four (write_files[].
// content, users[].ssh_authorized_keys[]); yaml.v3 itself allows 10,000.
// Deeper is refused (KX009).
const MaxYAMLDepth = 64

// yamlBoundError says which bound a YAML document passed.
type yamlBoundError struct {
	line int
	msg  string
}

func (e *yamlBoundError) Error() string { return e.msg }

// expandYAML returns a copy of the tree under n with aliases replaced by
// copies of their anchors' nodes and merge keys ("<<: *base", "<<: [*a,
// *b]") applied, keys of the mapping itself winning, as PyYAML's safe
// loader builds it. It fails with a *yamlBoundError past MaxYAMLNodes
// nodes or MaxYAMLDepth levels, or on an alias to a node that contains it.
func expandYAML(n *yaml.Node) (*yaml.Node, error) {
	x := &yamlExpander{}
	return x.expand(n, 0)
}

type yamlExpander struct {
	nodes int
	// open holds the anchors being expanded, to refuse an alias inside
	// its own anchor.
	open []*yaml.Node
}

func (x *yamlExpander) expand(n *yaml.Node, depth int) (*yaml.Node, error) {
	if n == nil {
		return nil, nil
	}
	if x.nodes++; x.nodes > MaxYAMLNodes {
		return nil, &yamlBoundError{line: n.Line, msg: fmt.Sprintf("expands to more than %d YAML nodes once its aliases are resolved", MaxYAMLNodes)}
	}
	if depth > MaxYAMLDepth {
		return nil, &yamlBoundError{line: n.Line, msg: fmt.Sprintf("nests YAML collections or aliases more than %d levels deep", MaxYAMLDepth)}
	}
	if n.Kind == yaml.AliasNode {
		for _, a := range x.open {
			if a == n.Alias {
				return nil, &yamlBoundError{line: n.Line, msg: "has an alias inside the node it refers to"}
			}
		}
		x.open = append(x.open, n.Alias)
		out, err := x.expand(n.Alias, depth+1)
		x.open = x.open[:len(x.open)-1]
		return out, err
	}
	out := *n
	out.Content = nil
	out.Anchor = ""
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			e, err := x.expand(c, depth+1)
			if err != nil {
				return nil, err
			}
			out.Content = append(out.Content, e)
		}
	case yaml.MappingNode:
		var merged []*yaml.Node // key, value pairs from merge keys
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
				mv, err := x.expand(v, depth+1)
				if err != nil {
					return nil, err
				}
				merged = append(merged, mergeSources(mv)...)
				continue
			}
			ek, err := x.expand(k, depth+1)
			if err != nil {
				return nil, err
			}
			ev, err := x.expand(v, depth+1)
			if err != nil {
				return nil, err
			}
			out.Content = append(out.Content, ek, ev)
		}
		if len(merged) > 0 {
			have := make(map[string]bool, len(out.Content)/2)
			for i := 0; i+1 < len(out.Content); i += 2 {
				have[out.Content[i].Value] = true
			}
			for i := 0; i+1 < len(merged); i += 2 {
				if !have[merged[i].Value] {
					have[merged[i].Value] = true
					out.Content = append(out.Content, merged[i], merged[i+1])
				}
			}
		}
	}
	return &out, nil
}

// mergeSources returns the key/value pairs a merge key's value brings: a
// mapping's, or those of each mapping in a sequence, earlier ones first.
func mergeSources(v *yaml.Node) []*yaml.Node {
	switch v.Kind {
	case yaml.MappingNode:
		return v.Content
	case yaml.SequenceNode:
		var out []*yaml.Node
		for _, m := range v.Content {
			if m.Kind == yaml.MappingNode {
				out = append(out, m.Content...)
			}
		}
		return out
	}
	return nil
}
