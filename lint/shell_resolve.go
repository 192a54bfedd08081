package lint

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// collectVars records literal assignments, twice so that X=kube; Y=${X}let
// resolves.
func (fs *fileScan) collectVars(f *syntax.File) {
	for pass := 0; pass < 2 && (pass == 0 || len(fs.vars) > 0); pass++ {
		syntax.Walk(f, func(n syntax.Node) bool {
			switch n := n.(type) {
			case *syntax.CallExpr:
				if len(n.Args) == 0 {
					for _, a := range n.Assigns {
						fs.assign(a)
					}
				}
			case *syntax.DeclClause:
				for _, a := range n.Args {
					fs.assign(a)
				}
			case *syntax.ForClause:
				if wi, ok := n.Loop.(*syntax.WordIter); ok && wi.Name != nil {
					for _, w := range wi.Items {
						for _, v := range fs.values(w) {
							fs.setVar(wi.Name.Value, v)
						}
					}
				}
			}
			return true
		})
	}
}

func (fs *fileScan) assign(a *syntax.Assign) {
	if a.Name == nil || a.Value == nil || a.Index != nil {
		return
	}
	if agent := pidLookup(a.Value); agent != "" {
		fs.pidVars[a.Name.Value] = agent
	}
	for _, v := range fs.values(a.Value) {
		fs.setVar(a.Name.Value, v)
	}
}

func (fs *fileScan) setVar(name, v string) {
	vs := fs.vars[name]
	for _, x := range vs {
		if x == v {
			return
		}
	}
	if len(vs) < maxWordValues {
		fs.vars[name] = append(vs, v)
	}
}

// values returns the literal strings w can expand to; parts that are not
// literal become unknown.
func (fs *fileScan) values(w *syntax.Word) []string {
	if w == nil {
		return []string{""}
	}
	return fs.partsValues(w.Parts, false)
}

func (fs *fileScan) partsValues(parts []syntax.WordPart, quoted bool) []string {
	out := []string{""}
	for _, p := range parts {
		var pv []string
		switch p := p.(type) {
		case *syntax.Lit:
			pv = []string{unescapeLit(p.Value, quoted)}
		case *syntax.SglQuoted:
			pv = []string{p.Value}
		case *syntax.DblQuoted:
			pv = fs.partsValues(p.Parts, true)
		case *syntax.ParamExp:
			pv = fs.paramValues(p)
		case *syntax.CmdSubst:
			pv = fs.substValues(p)
		default:
			pv = []string{unknown}
		}
		next := make([]string, 0, len(out)*len(pv))
		for _, a := range out {
			for _, b := range pv {
				if len(next) < maxWordValues {
					next = append(next, a+b)
				}
			}
		}
		out = next
	}
	return out
}

// substValues resolves $(echo kubelet) and $(printf …) of literals to
// what they print, without the trailing newlines the shell strips.
func (fs *fileScan) substValues(cs *syntax.CmdSubst) []string {
	if len(cs.Stmts) != 1 || len(cs.Stmts[0].Redirs) > 0 {
		return []string{unknown}
	}
	call, ok := cs.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 {
		return []string{unknown}
	}
	if text, ok := printed(fs.args(call.Args)); ok {
		return []string{strings.TrimRight(text, "\n")}
	}
	return []string{unknown}
}

func (fs *fileScan) paramValues(p *syntax.ParamExp) []string {
	if p.Param == nil || p.Excl || p.Length || p.Index != nil || p.Slice != nil || p.Repl != nil {
		return []string{unknown}
	}
	known := fs.vars[p.Param.Value]
	if p.Exp != nil {
		switch p.Exp.Op {
		case syntax.DefaultUnset, syntax.DefaultUnsetOrNull:
			if len(known) == 0 {
				return fs.values(p.Exp.Word)
			}
		default:
			return []string{unknown}
		}
	}
	if len(known) == 0 {
		return []string{unknown}
	}
	return known
}

// unescapeLit removes the backslashes the shell removes from an unquoted
// (or, with quoted, a double-quoted) literal, and line continuations.
func unescapeLit(s string, quoted bool) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		n := s[i+1]
		switch {
		case n == '\n':
			i++
		case !quoted || strings.IndexByte("$`\"\\", n) >= 0:
			b.WriteByte(n)
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// arg is one word of a command line: its literal values and, for the
// arguments of kill, when it expands to an agent's PID ($(pidof kubelet),
// $PID from such an assignment), the agent.
type arg struct {
	vals []string
	pid  string
	word *syntax.Word
}

func (a arg) first() string { return a.vals[0] }

// is reports whether every value of a equals one of want.
func (a arg) is(want ...string) bool {
	for _, v := range a.vals {
		found := false
		for _, w := range want {
			if v == w {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// args expands a command line's words. An unquoted expansion whose value
// has blanks splits into several words, as the shell's field splitting
// does: CMD="systemctl restart kubelet"; $CMD.
func (fs *fileScan) args(words []*syntax.Word) []arg {
	out := make([]arg, 0, len(words))
	for _, w := range words {
		vals := fs.values(w)
		if splits(w) && strings.ContainsAny(vals[0], " \t\n") {
			for _, f := range strings.Fields(vals[0]) {
				out = append(out, arg{vals: []string{f}, word: w})
			}
			continue
		}
		out = append(out, arg{vals: vals, word: w})
	}
	return out
}

// splits reports whether w has an unquoted parameter expansion or command
// substitution, which the shell splits into fields.
func splits(w *syntax.Word) bool {
	for _, p := range w.Parts {
		switch p.(type) {
		case *syntax.ParamExp, *syntax.CmdSubst:
			return true
		}
	}
	return false
}

// wordText is the literal text of a word with quotes removed, unknown
// parts dropped.
func wordText(w *syntax.Word) string {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				if l, ok := q.(*syntax.Lit); ok {
					b.WriteString(l.Value)
				}
			}
		}
	}
	return b.String()
}
