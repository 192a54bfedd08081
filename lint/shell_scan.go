package lint

import (
	"path"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// mayMatter reports whether a command named by w can matter: its name is
// not a literal, or is one of mattering.
func (fs *fileScan) mayMatter(w *syntax.Word) bool {
	for _, v := range fs.values(w) {
		if f := strings.Fields(v); len(f) > 0 && splits(w) {
			v = f[0]
		}
		if strings.Contains(v, unknown) || mattering[path.Base(v)] {
			return true
		}
	}
	return false
}

// stdin is what a command reads on standard input when it is literal: a
// here-document or here-string body.
type stdin struct {
	text string
	line int
	ok   bool
}

func (fs *fileScan) stdinOf(st *syntax.Stmt) stdin {
	for _, r := range st.Redirs {
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			if r.Hdoc != nil {
				v := fs.values(r.Hdoc)
				return stdin{text: v[0], line: fs.line(r.Hdoc.Pos()), ok: true}
			}
		case syntax.WordHdoc:
			v := fs.values(r.Word)
			return stdin{text: v[0], line: fs.line(r.Word.Pos()), ok: true}
		}
	}
	return stdin{}
}

// nested analyses a script found inside this one, starting at line; a
// syntax error in a fully literal nested script is reported as the
// outer script's KX002 by the caller through sc.nestedErr.
func (fs *fileScan) nested(src string, line int) {
	if fs.depth >= maxShellDepth || strings.Contains(src, unknown) {
		return
	}
	if err := fs.sc.script(src, line, fs.depth+1); err != nil {
		if err.tooDeep {
			fs.sc.add(RuleUserDataUninspectable, err.line, "a nested script cannot be read: "+err.msg)
			return
		}
		fs.sc.add(RuleUserDataParse, err.line, "a nested script does not parse: "+err.msg)
	}
}

// wordSource is w as written in the script, quoted, at most 40 bytes.
func wordSource(w *syntax.Word) string {
	var b strings.Builder
	if err := syntax.NewPrinter().Print(&b, w); err != nil {
		return "a word"
	}
	return strconv.Quote(truncate(b.String(), 40))
}
