package lint

import (
	"errors"
	"strings"

	"github.com/BurntSushi/toml"
)

// BottlerocketSettings is parsed Bottlerocket userData: the decoded TOML
// tree and the 1-based line where each dotted key path (table header or
// key) first appears.
type BottlerocketSettings struct {
	// Tree is the decoded TOML document.
	Tree map[string]any
	// Lines maps dotted key paths ("settings.kubernetes.max-pods") to the
	// 1-based line that defines them.
	Lines map[string]int
}

// ParseBottlerocketTOML parses Bottlerocket userData, which is TOML v1.0.0
// (Bottlerocket docs, "Settings": user data is TOML). Errors are *ParseError
// with the line and column of the first TOML syntax error.
func ParseBottlerocketTOML(text string) (*BottlerocketSettings, error) {
	tree := map[string]any{}
	if _, err := toml.Decode(text, &tree); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			line := pe.Position.Line
			// Count lines up to the error's byte offset: for an error on
			// a newline (an unterminated table header) the parser's line
			// is already the next one.
			if s := pe.Position.Start; s >= 0 && s < len(text) {
				line = 1 + strings.Count(text[:s], "\n")
			}
			return nil, &ParseError{Format: "TOML", Line: line, Msg: pe.Message}
		}
		return nil, &ParseError{Format: "TOML", Line: 0, Msg: err.Error()}
	}
	return &BottlerocketSettings{Tree: tree, Lines: tomlKeyLines(text)}, nil
}

// tomlKeyLines maps the dotted path of every table header and key to the
// line defining it. It assumes text already parsed as TOML, so it only has
// to follow headers ("[a.b]", "[[a]]") and "key = value" lines; values that
// span lines (multi-line strings and arrays) are skipped.
func tomlKeyLines(text string) map[string]int {
	out := map[string]int{}
	table := ""
	inMultiline := ""
	for i, raw := range eachLine(text) {
		line := strings.TrimSpace(raw)
		if inMultiline != "" {
			if strings.Contains(line, inMultiline) {
				inMultiline = ""
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		if strings.HasPrefix(line, "[") {
			h := strings.Trim(line, "[] \t")
			if c := strings.Index(h, "#"); c >= 0 {
				h = strings.TrimRight(strings.TrimSpace(h[:c]), "]")
			}
			table = normalizeTOMLKey(h)
			if _, ok := out[table]; !ok {
				out[table] = i + 1
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key := normalizeTOMLKey(k)
		if table != "" {
			key = table + "." + key
		}
		if _, seen := out[key]; !seen {
			out[key] = i + 1
		}
		v = strings.TrimSpace(v)
		for _, q := range []string{`"""`, `'''`} {
			if strings.HasPrefix(v, q) && !strings.Contains(v[3:], q) {
				inMultiline = q
			}
		}
	}
	return out
}

// normalizeTOMLKey turns `settings . "kubernetes"` into settings.kubernetes.
func normalizeTOMLKey(k string) string {
	parts := strings.Split(k, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}

// bottlerocketOwned lists the settings Karpenter writes into Bottlerocket
// userData, overriding user values (Karpenter docs, EC2NodeClasses,
// spec.userData, Bottlerocket: "Karpenter will automatically merge settings
// … settings.kubernetes.cluster-name, api-server, cluster-certificate,
// max-pods, node-labels, node-taints").
var bottlerocketOwned = []ownedSetting{
	{[]string{"settings", "kubernetes", "cluster-name"}, "cluster name"},
	{[]string{"settings", "kubernetes", "api-server"}, "API server endpoint"},
	{[]string{"settings", "kubernetes", "cluster-certificate"}, "cluster CA"},
	{[]string{"settings", "kubernetes", "max-pods"}, "max-pods"},
	{[]string{"settings", "kubernetes", "node-labels"}, "node labels"},
	{[]string{"settings", "kubernetes", "node-taints"}, "node taints"},
}

func (s *BottlerocketSettings) ownedFindings() []Finding {
	var out []Finding
	for _, o := range bottlerocketOwned {
		var n any = s.Tree
		for _, p := range o.path {
			m, ok := n.(map[string]any)
			if !ok {
				n = nil
				break
			}
			n = m[p]
		}
		if n == nil {
			continue
		}
		key := strings.Join(o.path, ".")
		out = append(out, ownedFinding(key, o.what, s.Lines[key]))
	}
	return out
}
