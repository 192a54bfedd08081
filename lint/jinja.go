package lint

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	controlstructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
	yaml "go.yaml.in/yaml/v3"
)

// This file renders the userData parts cloud-init renders as Jinja
// templates: a part whose first line is "## template: jinja" (cloud-init
// docs, "Instance metadata", "Using instance-data"; the handler of the
// text/jinja2 type), before the rendered text is read by its own first
// line as a shell script or cloud-config. cloud-init renders with Jinja's
// trim_blocks and the instance data of the instance (instance-data.json:
// the v1 keys, ds.meta_data and the rest), which karpx does not have at
// admission. The template is parsed with gonja (github.com/nikolalohinski/
// gonja/v2, pinned in go.mod) and rendered by karpx over gonja's syntax
// tree, so that what a node could run is known for every value the
// instance data can take:
//
//   - literal text, comments and literal expressions ({{ 'stop' }}) render
//     as Jinja renders them;
//   - an instance-data variable whose value AWS or cloud-init fixes is that
//     value (v1.cloud_name and v1.cloud_id "aws", v1.platform "ec2"); any
//     other variable renders a stand-in that becomes a taint mark, so that
//     a command named by it is uninspectable (KX009) and a script built
//     from it is not followed; filters that change only the case or the
//     spaces of a value (lower, upper, title, capitalize, trim, string)
//     keep a stand-in a stand-in and apply to known text;
//   - {% if %} / {% elif %} / {% else %} is not decided (its condition may
//     read instance data): every branch is rendered, each in its own
//     rendering, and every rendering is scanned, at most maxJinjaRenderings,
//     until one is denied (the part is then denied whatever the others
//     hold) or the scans have taken maxJinjaScanTime together (then the part
//     is uninspectable: 32 renderings each running the sandbox to its
//     bound must not hold a review for 32 of them);
//   - anything else ({% for %}, {% set %}, {% macro %}, {% include %},
//     {% raw %}, calls, operators, other filters) and instance data whose
//     text is free-form (instance tags, user data, vendor data, merged
//     configuration, public keys) is uninspectable: such a value could
//     spell a command or YAML structure karpx does not see.
//
// Parsing and rendering are bounded before gonja sees the text: at most
// maxJinjaTags tags, brackets nested at most maxJinjaNesting deep inside a
// tag, at most maxJinjaRenderings renderings of at most maxJinjaBytes in
// all. Conditions are never evaluated, so no template loops or grows.

// Bounds of rendering one template.
const (
	// maxJinjaTags bounds the {{ }}, {% %} and {# #} tags of a template:
	// 1,000, far above the templates of cloud-init's documentation (a
	// few), so that the parser's work is bounded before it starts.
	maxJinjaTags = 1000
	// maxJinjaNesting bounds the brackets nested inside one tag and the
	// {% if %} blocks nested in each other: 32; the parser recurses once
	// per level.
	maxJinjaNesting = 32
	// maxJinjaRenderings bounds the renderings of one template (the
	// product of the branches of its {% if %} blocks): 32, each scanned
	// like a part.
	maxJinjaRenderings = 32
	// maxJinjaBytes bounds the bytes of all renderings of one template
	// together: 4 MiB, four times MaxDecodedBytes.
	maxJinjaBytes = 4 << 20
	// maxJinjaScanTime bounds the time the scans of one template's
	// renderings take together: 500 ms, half the sandbox's own bound
	// (maxInterpTime), so that a template cannot multiply a review's
	// time by its renderings; an ordinary rendering scans in about a
	// millisecond.
	maxJinjaScanTime = 500 * time.Millisecond
)

// jinjaUnknown is what an instance-data variable karpx cannot know renders
// to: a word that survives YAML and shell parsing, replaced by the taint
// mark jinjaMark before the rendering is run (markJinjaYAML, scanJinja).
const jinjaUnknown = "karpx-unknown-instance-data-3a51f0"

// jinjaMark is the taint mark of a value read from cloud-init's instance
// data; index 1 of every sandbox's sources (runSandboxWith).
const jinjaMark = taintPrefix + "1#\x01"

// jinjaMarkSource is what jinjaMark stands for in findings.
const jinjaMarkSource = "cloud-init instance data rendered into a Jinja template"

// jinjaStructures are the control structures karpx renders: {% if %}
// alone; gonja's parser refuses every other block tag as unknown.
var jinjaStructures = func() *exec.ControlStructureSet {
	ifParser, _ := controlstructures.All.Get("if")
	return exec.NewControlStructureSet(map[string]parser.ControlStructureParser{"if": ifParser})
}()

// jinjaConstants are the instance-data keys whose value every EC2
// instance has (cloud-init docs, "Instance metadata", v1 keys for the
// Ec2 datasource), under v1 or at the top level.
var jinjaConstants = map[string]string{
	"cloud_name": "aws",
	"cloud_id":   "aws",
	"platform":   "ec2",
}

// jinjaFreeForm are instance-data keys whose text is free-form: EC2
// instance tags (which the EC2NodeClass's own spec.tags set), user data
// and vendor data, the merged cloud-config, system information and
// public keys with their comments. A path through one is uninspectable.
var jinjaFreeForm = setOf("tags", "user_data", "userdata", "vendor_data", "vendor2_data", "merged_cfg",
	"merged_system_cfg", "sys_info", "system_info", "public_ssh_keys", "public_keys", "_beta_keys",
	"sensitive_keys", "base64_encoded_keys", "features")

// jinjaCaseFilters are the filters that change only the case or the
// surrounding spaces of a value (Jinja docs, "List of Builtin Filters").
var jinjaCaseFilters = map[string]func(string) string{
	"lower":      strings.ToLower,
	"upper":      strings.ToUpper,
	"trim":       strings.TrimSpace,
	"string":     func(s string) string { return s },
	"capitalize": func(s string) string { return upperFirst(strings.ToLower(s)) },
	"title":      jinjaTitle,
}

// jinjaError is why a template cannot be rendered, at a 1-based line of
// the template body.
type jinjaError struct {
	line int
	msg  string
}

func (e *jinjaError) Error() string { return e.msg }

// renderJinja renders the template body (the text after the "## template:
// jinja" line) once for each combination of its {% if %} branches, and
// returns the distinct renderings, in which jinjaUnknown stands for the
// instance data karpx cannot know. A template karpx cannot render within
// its bounds is a *jinjaError.
func renderJinja(body string) (out []string, err error) {
	if e := jinjaBounds(body); e != nil {
		return nil, e
	}
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, &jinjaError{line: 1, msg: fmt.Sprintf("the Jinja parser failed on it (%v)", p)}
		}
	}()
	cfg := config.New()
	cfg.TrimBlocks = true // cloud-init renders with trim_blocks=True (cloudinit/templater.py)
	tpl, perr := parser.NewParser("userData", tokens.LexAll(body, cfg), cfg, nil, jinjaStructures).Parse()
	if perr != nil {
		return nil, &jinjaError{line: jinjaErrorLine(perr), msg: "it does not parse as a template karpx renders: " + oneLine(perr.Error())}
	}
	r := jinjaRenderer{}
	worlds, rerr := r.nodes(tpl.Nodes)
	if rerr != nil {
		return nil, rerr
	}
	seen := make(map[string]bool, len(worlds))
	for _, w := range worlds {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out, nil
}

// jinjaBounds checks the tag count and the nesting of brackets inside
// tags and of {% if %} blocks before the template is parsed.
func jinjaBounds(body string) *jinjaError {
	tags, ifs, line := 0, 0, 1
	for i := 0; i+1 < len(body); i++ {
		c := body[i]
		if c == '\n' {
			line++
			continue
		}
		if c != '{' || (body[i+1] != '{' && body[i+1] != '%' && body[i+1] != '#') {
			continue
		}
		tags++
		if tags > maxJinjaTags {
			return &jinjaError{line: line, msg: fmt.Sprintf("it has more than %d template tags", maxJinjaTags)}
		}
		closer := "}}"
		switch body[i+1] {
		case '%':
			closer = "%}"
		case '#':
			closer = "#}"
		}
		end := strings.Index(body[i+2:], closer)
		if end < 0 {
			return &jinjaError{line: line, msg: "a template tag is not closed"}
		}
		tag := body[i+2 : i+2+end]
		if body[i+1] == '%' {
			switch f := strings.Fields(strings.Trim(tag, "-+ \t\r\n")); {
			case len(f) > 0 && f[0] == "if":
				ifs++
			case len(f) > 0 && f[0] == "endif":
				ifs--
			}
			if ifs > maxJinjaNesting {
				return &jinjaError{line: line, msg: fmt.Sprintf("it nests {%% if %%} blocks more than %d deep", maxJinjaNesting)}
			}
		}
		if body[i+1] != '#' {
			depth := 0
			var quote byte
			for k := 0; k < len(tag); k++ {
				switch b := tag[k]; {
				case quote != 0:
					if b == '\\' {
						k++
					} else if b == quote {
						quote = 0
					}
				case b == '\'' || b == '"':
					quote = b
				case b == '(' || b == '[' || b == '{':
					depth++
					if depth > maxJinjaNesting {
						return &jinjaError{line: line, msg: fmt.Sprintf("a template tag nests brackets more than %d deep", maxJinjaNesting)}
					}
				case b == ')' || b == ']' || b == '}':
					depth--
				}
			}
		}
		line += strings.Count(tag, "\n")
		i += 2 + end + len(closer) - 1
	}
	return nil
}

// jinjaRenderer renders gonja's syntax tree into every combination of
// branches, counting the bytes made.
type jinjaRenderer struct{ bytes int }

// nodes renders a sequence: the product of its nodes' renderings.
func (r *jinjaRenderer) nodes(ns []nodes.Node) ([]string, error) {
	acc := []string{""}
	for _, n := range ns {
		alts, err := r.node(n)
		if err != nil {
			return nil, err
		}
		if len(alts) == 1 {
			for i := range acc {
				if err := r.charge(n, len(alts[0])); err != nil {
					return nil, err
				}
				acc[i] += alts[0]
			}
			continue
		}
		if len(acc)*len(alts) > maxJinjaRenderings {
			return nil, &jinjaError{line: jinjaLine(n), msg: fmt.Sprintf("its {%% if %%} branches combine into more than %d renderings", maxJinjaRenderings)}
		}
		next := make([]string, 0, len(acc)*len(alts))
		for _, a := range acc {
			for _, b := range alts {
				if err := r.charge(n, len(a)+len(b)); err != nil {
					return nil, err
				}
				next = append(next, a+b)
			}
		}
		acc = next
	}
	return acc, nil
}

func (r *jinjaRenderer) charge(n nodes.Node, k int) error {
	r.bytes += k
	if r.bytes > maxJinjaBytes {
		return &jinjaError{line: jinjaLine(n), msg: fmt.Sprintf("its renderings are larger than %d bytes", maxJinjaBytes)}
	}
	return nil
}

// node renders one node into its alternatives.
func (r *jinjaRenderer) node(n nodes.Node) ([]string, error) {
	switch n := n.(type) {
	case *nodes.Data:
		return []string{jinjaData(n)}, nil
	case *nodes.Comment:
		return []string{""}, nil
	case *nodes.Output:
		if n.Condition != nil {
			return nil, &jinjaError{line: jinjaLine(n), msg: "an inline {{ … if … else … }} expression is not rendered by karpx"}
		}
		v, err := jinjaEval(n.Expression)
		if err != nil {
			return nil, err
		}
		return []string{v}, nil
	case *nodes.ControlStructureBlock:
		ifs, ok := n.ControlStructure.(*controlstructures.IfControlStructure)
		if !ok {
			return nil, &jinjaError{line: jinjaLine(n), msg: "{% " + n.Name + " %} is not rendered by karpx"}
		}
		var alts []string
		for _, w := range ifs.Wrappers {
			sub, err := r.nodes(w.Nodes)
			if err != nil {
				return nil, err
			}
			alts = append(alts, sub...)
		}
		if len(ifs.Wrappers) == len(ifs.Conditions) {
			alts = append(alts, "") // no {% else %}: no branch taken
		}
		if len(alts) > maxJinjaRenderings {
			return nil, &jinjaError{line: jinjaLine(n), msg: fmt.Sprintf("its {%% if %%} branches combine into more than %d renderings", maxJinjaRenderings)}
		}
		return alts, nil
	}
	return nil, &jinjaError{line: jinjaLine(n), msg: fmt.Sprintf("%T is not rendered by karpx", n)}
}

// jinjaData is a data node's text with the whitespace control gonja's
// lexer and parser recorded on it (trim_blocks, {%- and -%}), applied as
// gonja's renderer applies it.
func jinjaData(n *nodes.Data) string {
	out := n.Data.Val
	if n.RemoveFirstLineReturn {
		out = strings.TrimPrefix(out, "\r\n")
		out = strings.TrimPrefix(out, "\n")
	}
	if n.Trim.Left {
		out = strings.TrimLeft(out, " \r\n\t")
	}
	if n.Trim.Right {
		out = strings.TrimRight(out, " \r\n\t")
	}
	if n.RemoveTrailingWhiteSpaceFromLastLine {
		if i := strings.LastIndexByte(out, '\n'); i >= 0 {
			out = out[:i+1] + strings.TrimRight(out[i+1:], " \n\t\r")
		} else {
			out = strings.TrimRight(out, " \n\t\r")
		}
	}
	return out
}

// jinjaEval is the text an output expression renders to, jinjaUnknown for
// instance data karpx cannot know, or a *jinjaError for an expression
// karpx does not render.
func jinjaEval(e nodes.Expression) (string, error) {
	switch e := e.(type) {
	case *nodes.String:
		return e.Val, nil
	case *nodes.Integer:
		return strconv.Itoa(e.Val), nil
	case *nodes.Bool:
		if e.Val {
			return "True", nil
		}
		return "False", nil
	case *nodes.None:
		return "None", nil
	case *nodes.Name, *nodes.GetAttribute, *nodes.GetItem:
		path, ok := jinjaPath(e)
		if !ok {
			return "", &jinjaError{line: jinjaLine(e), msg: fmt.Sprintf("the expression %s is not an instance-data variable karpx renders", e)}
		}
		return jinjaLookup(e, path)
	case *nodes.FilteredExpression:
		v, err := jinjaEval(e.Expression)
		if err != nil {
			return "", err
		}
		for _, f := range e.Filters {
			apply, ok := jinjaCaseFilters[f.Name]
			if !ok || len(f.Args) > 0 || len(f.Kwargs) > 0 {
				return "", &jinjaError{line: jinjaLine(e), msg: fmt.Sprintf("the filter %q is not rendered by karpx", f.Name)}
			}
			if v != jinjaUnknown {
				v = apply(v)
			}
		}
		return v, nil
	}
	return "", &jinjaError{line: jinjaLine(e), msg: fmt.Sprintf("the expression %s is not rendered by karpx (only literals, instance-data variables and case filters are)", e)}
}

// jinjaPath is the key path of a variable (v1.region → [v1 region]).
func jinjaPath(e nodes.Node) ([]string, bool) {
	switch e := e.(type) {
	case *nodes.Name:
		return []string{e.Name.Val}, true
	case *nodes.GetAttribute:
		p, ok := jinjaPath(e.Node)
		if !ok {
			return nil, false
		}
		if e.Attribute != "" {
			return append(p, e.Attribute), true
		}
		return append(p, strconv.Itoa(e.Index)), true
	case *nodes.GetItem:
		p, ok := jinjaPath(e.Node)
		if !ok {
			return nil, false
		}
		switch a := e.Arg.(type) {
		case *nodes.String:
			return append(p, a.Val), true
		case *nodes.Integer:
			return append(p, strconv.Itoa(a.Val)), true
		}
	}
	return nil, false
}

// jinjaLookup is the value of an instance-data path: a constant, the
// stand-in for a value karpx cannot know, or a *jinjaError for free-form
// data. cloud-init also offers every hyphenated key with underscores
// (instance-id as instance_id), so both spellings are read alike.
func jinjaLookup(e nodes.Node, path []string) (string, error) {
	for _, k := range path {
		if jinjaFreeForm[strings.ReplaceAll(k, "-", "_")] {
			return "", &jinjaError{line: jinjaLine(e), msg: fmt.Sprintf("%s is free-form instance data (%s), which can spell any command", strings.Join(path, "."), k)}
		}
	}
	keys := path
	if len(keys) == 2 && keys[0] == "v1" {
		keys = keys[1:]
	}
	if len(keys) == 1 {
		if v, ok := jinjaConstants[strings.ReplaceAll(keys[0], "-", "_")]; ok {
			return v, nil
		}
	}
	return jinjaUnknown, nil
}

// jinjaLine is the 1-based template line of n.
func jinjaLine(n nodes.Node) int {
	if n == nil {
		return 1
	}
	if t := n.Position(); t != nil && t.Line > 0 {
		return t.Line
	}
	return 1
}

// jinjaErrorLine is the line a gonja parse error names, or 1.
func jinjaErrorLine(err error) int {
	var se *parser.SyntaxError
	if errors.As(err, &se) && se.Line > 0 {
		return se.Line
	}
	return 1
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// jinjaTitle is Jinja's title filter on ASCII words.
func jinjaTitle(s string) string {
	b := []byte(strings.ToLower(s))
	start := true
	for i, c := range b {
		isLetter := c >= 'a' && c <= 'z'
		if start && isLetter {
			b[i] = c - 'a' + 'A'
		}
		start = !(isLetter || c >= '0' && c <= '9')
	}
	return string(b)
}

// scanJinja renders a "## template: jinja" part and scans every rendering
// as the part cloud-init makes of it: each is read by its first line
// (a shell script, cloud-config, …), with jinjaUnknown made a taint mark.
// A template karpx cannot render is KX009. A text/jinja2 MIME part
// without the header is read as cloud-config, as before.
func scanJinja(s segment, depth int) []Finding {
	body, off, ok := cloudConfigBody(s.text)
	if !ok {
		s.kind = segCloudConfig
		return scanSegment(s, depth)
	}
	worlds, err := renderJinja(body)
	if err != nil {
		je := err.(*jinjaError)
		return []Finding{uninspectable(s, off+je.line-1,
			"is a Jinja template (## template: jinja) that cloud-init renders with the instance's data, and karpx cannot render it: "+je.msg)}
	}
	var out []Finding
	deadline := time.Now().Add(maxJinjaScanTime)
	for i, w := range worlds {
		if i > 0 && time.Now().After(deadline) {
			out = append(out, uninspectable(s, off, fmt.Sprintf(
				"is a Jinja template whose %d renderings karpx cannot all inspect within %v (%d inspected)", len(worlds), maxJinjaScanTime, i)))
			break
		}
		r := segment{kind: guessKind(w), text: w, line: s.lineOf(off), encoded: true, part: s.part}
		switch r.kind {
		case segJinja:
			r.kind = segOpaque // cloud-init renders a part once
		case segShell, segPowerShell:
			r.text = strings.ReplaceAll(w, jinjaUnknown, jinjaMark)
		}
		fs := scanSegment(r, depth+1)
		out = append(out, fs...)
		if deniedWhatever(fs) {
			break // the part is denied; the other renderings cannot change that
		}
	}
	return out
}

// deniedWhatever reports whether fs holds a denial that no setting turns
// into a warning (an unresolved KX009 is one --uninspectable-commands=warn
// does).
func deniedWhatever(fs []Finding) bool {
	for _, f := range fs {
		if f.Severity == SeverityDeny && !f.unresolved {
			return true
		}
	}
	return false
}

// markJinjaYAML replaces jinjaUnknown in every scalar of a rendered
// cloud-config by the taint mark jinjaMark (YAML cannot carry the mark's
// control characters through the parser).
func markJinjaYAML(n *yaml.Node) {
	if n == nil {
		return
	}
	if strings.Contains(n.Value, jinjaUnknown) {
		n.Value = strings.ReplaceAll(n.Value, jinjaUnknown, jinjaMark)
	}
	for _, c := range n.Content {
		markJinjaYAML(c)
	}
}
