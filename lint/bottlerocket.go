package lint

import (
	"errors"
	"fmt"
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

// MaxTOMLDepth bounds how deeply arrays and inline tables may nest in
// Bottlerocket userData: 32 levels. Bottlerocket's settings nest four or
// five (settings.kubernetes.node-labels); github.com/BurntSushi/toml has
// no bound, and its cost grows faster than the nesting: 16 KB of nested
// inline tables took it 3 s and 350 MB. Deeper nesting is refused before
// the TOML parser runs (a *ParseError with Uninspectable set, KX009).
const MaxTOMLDepth = 32

// ParseBottlerocketTOML parses Bottlerocket userData, which is TOML v1.0.0
// (Bottlerocket docs, "Settings": user data is TOML). Errors are *ParseError
// with the line and column of the first TOML syntax error; arrays or inline
// tables nested more than MaxTOMLDepth deep are a *ParseError with
// Uninspectable set, found without running the TOML parser.
func ParseBottlerocketTOML(text string) (*BottlerocketSettings, error) {
	if depth, line := tomlNesting(text); depth > MaxTOMLDepth {
		return nil, &ParseError{Format: "TOML", Line: line, Uninspectable: true,
			Msg: fmt.Sprintf("arrays or inline tables nest more than %d levels deep; Bottlerocket settings need a few", MaxTOMLDepth)}
	}
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

// tomlNesting returns the deepest nesting of "[" and "{" in text outside
// TOML strings and comments (basic and literal strings, their multi-line
// forms, "#" to the end of the line), counted up to MaxTOMLDepth+1, and
// the 1-based line where it was reached. Table headers count as one
// level ("[[a]]" as two), which only makes the count higher. It reads
// each byte once.
func tomlNesting(text string) (depth, line int) {
	cur, ln := 0, 1
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '\n':
			ln++
		case '#':
			for i+1 < len(text) && text[i+1] != '\n' {
				i++
			}
		case '"', '\'':
			i, ln = tomlStringEnd(text, i, ln)
		case '[', '{':
			if cur++; cur > depth {
				depth, line = cur, ln
				if depth > MaxTOMLDepth {
					return depth, line
				}
			}
		case ']', '}':
			if cur > 0 {
				cur--
			}
		}
	}
	return depth, line
}

// tomlStringEnd returns the index of the last byte of the string that
// starts at text[i] (a quote) and the line it ends on, ln counting the
// lines it spans. A basic string ('"') has backslash escapes, a literal
// one none; tripled quotes make it multi-line. A single-line string ends
// at the end of its line at the latest (TOML rejects it there).
func tomlStringEnd(text string, i, ln int) (int, int) {
	q := text[i]
	delim := text[i : i+1]
	if strings.HasPrefix(text[i:], strings.Repeat(delim, 3)) {
		delim = strings.Repeat(delim, 3)
	}
	for j := i + len(delim); j < len(text); j++ {
		switch {
		case text[j] == '\\' && q == '"':
			if j+1 < len(text) && text[j+1] == '\n' {
				ln++
			}
			j++ // the escaped byte is never a delimiter
		case text[j] == '\n':
			if len(delim) == 1 {
				return j - 1, ln
			}
			ln++
		case strings.HasPrefix(text[j:], delim):
			return j + len(delim) - 1, ln
		}
	}
	return len(text) - 1, ln
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
