package lint

import (
	"errors"
	"fmt"
	"io"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// This file is the shell model behind KX003 and KX007: every script karpx
// finds (shell parts, boothooks, runcmd and bootcmd entries, scripts written
// to boot-executed paths) is parsed with mvdan.cc/sh/v3/syntax as Bash, and
// the commands the parser finds are judged by what they do, after simple
// literal variable assignments (X=kubelet; for s in a b) are substituted.
// Scripts nested in a command line (sh -c '…', eval '…', here-documents and
// here-strings fed to a shell or to at(1), echo … | sh) are parsed in turn.

// maxShellDepth bounds the nesting of scripts in scripts (sh -c "sh -c …").
const maxShellDepth = 6

// maxWordValues bounds how many literal values one word can expand to when
// a variable was assigned several values (for s in a b c; …).
const maxWordValues = 16

// unknown marks the part of a word that is not a literal (a command
// substitution, an unassigned variable): such a word matches no name.
const unknown = "\x00"

// shellEffect is one thing a script does that a rule cares about.
type shellEffect struct {
	// rule is RuleUserDataNodeRestart or RuleUserDataHTTPPipe.
	rule string
	// line is the 1-based line in the analysed text.
	line int
	// what names the command, e.g. "systemctl restart kubelet".
	what string
	// finding is the secret finding of a ruleFileSecret effect, its line
	// within the file written.
	finding *Finding
}

// shellSyntaxError is a script the parser rejects, at a 1-based line and
// column of the analysed text.
type shellSyntaxError struct {
	line, col int
	msg       string
	// tooDeep is set when the parse was stopped by the nesting bound
	// (maxShellParseFrames): the script may well be valid, but karpx
	// cannot read it, so it is uninspectable (KX009) rather than KX002.
	tooDeep bool
}

// shellParser is a parser and its input, pooled together so that a parse
// allocates neither.
type shellParser struct {
	p *syntax.Parser
	g depthGuard
}

var shellParsers = sync.Pool{New: func() any {
	return &shellParser{p: syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(false))}
}}

// maxShellParseFrames bounds the call stack mvdan.cc/sh/v3/syntax's
// recursive-descent parser may build: 4,000 frames. The parser has no
// nesting limit of its own and recurses for every level of subshell,
// command substitution, brace group, compound command and arithmetic
// expression; one "(" inside "((" costs it about 28 frames (4 KB of
// stack), so 2 MB of nested "((" overflowed the goroutine's 1 GB stack
// (fatal, not recoverable), and 50 KB took 200 MB. 4,000 frames is
// about 140 nested arithmetic parentheses or several hundred nested
// subshells, on top of the few dozen frames of its callers (webhook
// handler, lint); real scripts nest a few levels.
const maxShellParseFrames = 4000

// errShellTooDeep stops a parse that passed maxShellParseFrames.
var errShellTooDeep = errors.New("nesting too deep")

// depthGuard is the parser's input. The parser asks for up to 1 KiB at a
// time (its buffer); before handing over each chunk after the first,
// depthGuard checks how deep the call stack is, and fails the read once
// it is deeper than maxShellParseFrames, which makes the parser stop with
// that error. This measures the parser's real recursion rather than a
// model of the shell's lexer: quotes, here-documents, case patterns and
// comments cannot hide nesting from it. Between two checks the parser
// reads at most 1 KiB, so it can grow by at most about 28,000 frames
// (some 5 MB of stack) past the bound before it is stopped. A check
// walks the stack (runtime.Callers): 7 µs at the 50 frames of an ordinary
// parse, 280 µs at 3,000 (BenchmarkDepthCheck, on 2 cores under a load
// average of 20), so a 16 KiB script pays 16 checks; scripts under 1 KiB,
// most userData, are never checked.
type depthGuard struct {
	src   string
	off   int
	reads int
	pc    [1]uintptr
}

// Read implements io.Reader.
func (g *depthGuard) Read(p []byte) (int, error) {
	if g.off >= len(g.src) {
		return 0, io.EOF
	}
	if g.reads++; g.reads > 1 && runtime.Callers(maxShellParseFrames, g.pc[:]) > 0 {
		return 0, errShellTooDeep
	}
	n := copy(p, g.src[g.off:])
	g.off += n
	return n, nil
}

// blankCommentLines returns src with every line that is only a comment
// (blanks, then "#") emptied, its newline kept, so that line numbers do
// not change. The parser reads each comment line of a run of them one
// call deeper (its lexer's next calls itself after a comment), so 1 MB of
// "#" lines cost it 500,000 frames and 128 MB of stack; blank lines cost
// none. The first line (a "#!" interpreter line), a line continuing a
// line that ends in a backslash, and a line that could end a here-document
// (its text is a word written after some "<<", as in cat <<'#EOF') are
// kept: emptying a delimiter would make the rest of the script the
// here-document's data. Secrets in comments are still found: the secret
// rules read the text, not the parse.
func blankCommentLines(src string) string {
	// minCommentRun: below this many "#", a run of comment lines costs
	// the parser at most that many small frames, so src is used as is.
	const minCommentRun = 64
	if strings.Count(src, "#") < minCommentRun {
		return src // too few comments to matter; no copy
	}
	delims := hereDocWords(src)
	var b []byte // nil until the first change
	prevCont := false
	for i := 0; i < len(src); {
		end := strings.IndexByte(src[i:], '\n')
		if end < 0 {
			end = len(src)
		} else {
			end += i
		}
		line := src[i:end]
		t := strings.TrimLeft(line, " \t")
		if i > 0 && !prevCont && strings.HasPrefix(t, "#") && !delims[strings.TrimRight(t, " \t\r")] {
			if b == nil {
				b = make([]byte, 0, len(src))
				b = append(b, src[:i]...)
			}
		} else if b != nil {
			b = append(b, line...)
		}
		if b != nil && end < len(src) {
			b = append(b, '\n')
		}
		n := len(line) - len(strings.TrimRight(line, "\\"))
		prevCont = n%2 == 1
		i = end + 1
	}
	if b == nil {
		return src
	}
	return string(b)
}

// hereDocWords returns the words that follow "<<" (or "<<-") in src with
// their quotes (single, double, $'…' and $"…") and backslashes removed, as
// the shell reads a here-document's delimiter; a here-string ("<<<") has
// none. A delimiter it misreads only costs a KX002: an emptied delimiter
// leaves the here-document unclosed, which the parser rejects.
func hereDocWords(src string) map[string]bool {
	var out map[string]bool
	for i := 0; ; {
		j := strings.Index(src[i:], "<<")
		if j < 0 {
			return out
		}
		i += j + 2
		if i < len(src) && src[i] == '<' {
			for i < len(src) && src[i] == '<' {
				i++
			}
			continue
		}
		if i < len(src) && src[i] == '-' {
			i++
		}
		for i < len(src) && (src[i] == ' ' || src[i] == '\t') {
			i++
		}
		start := i
		for i < len(src) && !strings.ContainsRune(" \t\n;|&<>()", rune(src[i])) {
			i++
		}
		w := strings.NewReplacer("$'", "", `$"`, "", "'", "", `"`, "", `\`, "").Replace(src[start:i])
		if out == nil {
			out = map[string]bool{}
		}
		out[w] = true
	}
}

// parseShell parses src as Bash, within maxShellParseFrames.
func parseShell(src string) (*syntax.File, *shellSyntaxError) {
	sp := shellParsers.Get().(*shellParser)
	defer func() {
		sp.g = depthGuard{} // do not keep src alive in the pool
		shellParsers.Put(sp)
	}()
	sp.g = depthGuard{src: blankCommentLines(src)}
	f, err := sp.p.Parse(&sp.g, "")
	if err != nil {
		if pe, ok := err.(syntax.ParseError); ok {
			return nil, &shellSyntaxError{line: int(pe.Pos.Line()), col: int(pe.Pos.Col()), msg: pe.Text}
		}
		if le, ok := err.(syntax.LangError); ok {
			return nil, &shellSyntaxError{line: int(le.Pos.Line()), col: int(le.Pos.Col()), msg: le.Error()}
		}
		if errors.Is(err, errShellTooDeep) {
			return nil, &shellSyntaxError{line: 1, col: 1, tooDeep: true,
				msg: fmt.Sprintf("its subshells, command substitutions, compound commands or arithmetic nest deeper than karpx parses (the parser passed %d call frames)", maxShellParseFrames)}
		}
		return nil, &shellSyntaxError{line: 1, col: 1, msg: err.Error()}
	}
	return f, nil
}

// analyzeShell parses src and returns what it does to the node, or the
// syntax error that stops the parse.
func analyzeShell(src string) ([]shellEffect, *shellSyntaxError) {
	sc := &shellScan{}
	if err := sc.script(src, 1, 0); err != nil {
		return nil, err
	}
	return sc.effects, nil
}

// shellScan accumulates the effects of one script and the scripts nested
// in it.
type shellScan struct {
	effects []shellEffect
	// dynamic holds the simple commands of the top script whose command
	// or script the static scan cannot resolve, by offset: the sandbox
	// (shell_interp.go) must have run them, else they are unresolved.
	dynamic map[uint]shellEffect
}

func (sc *shellScan) add(rule string, line int, what string) {
	for _, e := range sc.effects {
		if e.rule == rule && e.line == line {
			return
		}
	}
	sc.effects = append(sc.effects, shellEffect{rule: rule, line: line, what: what})
}

// script analyses src, whose first line is line base of the outer text.
func (sc *shellScan) script(src string, base, depth int) *shellSyntaxError {
	f, perr := parseShell(src)
	if perr != nil {
		perr.line += base - 1
		return perr
	}
	fs := &fileScan{sc: sc, base: base, depth: depth, vars: map[string][]string{}, pidVars: map[string]string{}}
	fs.collectVars(f)
	syntax.Walk(f, func(n syntax.Node) bool {
		if st, ok := n.(*syntax.Stmt); ok {
			fs.stmt(st)
		}
		return true
	})
	if depth == 0 {
		sc.interpret(f, base)
	}
	return nil
}

// interpret runs the top script f in the sandbox and adds what it finds:
// the commands it ran that the rules deny, the commands it could not
// determine, and the dynamic commands (sc.dynamic) it never reached.
func (sc *shellScan) interpret(f *syntax.File, base int) {
	effects, executed := interpretShell(f, base)
	for _, e := range effects {
		if e.finding != nil {
			sc.effects = append(sc.effects, e)
			continue
		}
		sc.add(e.rule, e.line, e.what)
	}
	offs := make([]uint, 0, len(sc.dynamic))
	for off := range sc.dynamic {
		offs = append(offs, off)
	}
	slices.Sort(offs)
	for _, off := range offs {
		if !executed[off] {
			e := sc.dynamic[off]
			sc.add(ruleUnresolved, e.line, e.what+" on a path karpx's interpreter did not take")
		}
	}
}

// dynamicAt records a simple command of the top script that only the
// sandbox can resolve.
func (fs *fileScan) dynamicAt(w *syntax.Word, what string) {
	if fs.depth != 0 {
		return
	}
	if fs.sc.dynamic == nil {
		fs.sc.dynamic = map[uint]shellEffect{}
	}
	fs.sc.dynamic[w.Pos().Offset()] = shellEffect{rule: ruleUnresolved, line: fs.line(w.Pos()), what: what}
}

// fileScan is the analysis of one parsed script.
type fileScan struct {
	sc    *shellScan
	base  int
	depth int
	// vars holds every literal value assigned to a variable anywhere in
	// the script (assignments, declare/export/local, for-loop items).
	vars map[string][]string
	// pidVars maps variables assigned from $(pidof kubelet) and the like
	// to the agent whose PID they hold.
	pidVars map[string]string
}

func (fs *fileScan) line(p syntax.Pos) int { return fs.base + int(p.Line()) - 1 }

// stmt analyses one statement: its command (a simple command, or a
// pipeline for what flows from one side to the other) and redirections.
func (fs *fileScan) stmt(st *syntax.Stmt) {
	switch cmd := st.Cmd.(type) {
	case *syntax.CallExpr:
		if len(cmd.Args) == 0 || (len(st.Redirs) == 0 && !fs.mayMatter(cmd.Args[0])) {
			return
		}
		argv := fs.args(cmd.Args)
		line := fs.line(cmd.Args[0].Pos())
		fs.checkDynamic(cmd, argv, fs.stdinOf(st))
		fs.command(argv, line, fs.stdinOf(st), st.Redirs)
		fs.redirects(argv, st.Redirs, line)
	case *syntax.BinaryCmd:
		if cmd.Op != syntax.Pipe && cmd.Op != syntax.PipeAll {
			return
		}
		y, ok := cmd.Y.Cmd.(*syntax.CallExpr)
		if !ok || len(y.Args) == 0 || !fs.mayMatter(y.Args[0]) {
			return
		}
		x := cmd.X
		for {
			b, ok := x.Cmd.(*syntax.BinaryCmd)
			if !ok || (b.Op != syntax.Pipe && b.Op != syntax.PipeAll) {
				break
			}
			x = b.Y
		}
		yargv := fs.args(y.Args)
		fs.pipe(x, yargv, fs.line(y.Args[0].Pos()))
		if u := unwrapNoXargs(yargv); len(u) > 0 && (shells[path.Base(u[0].first())] || u[0].is("at", "batch")) && !hasDashC(u[1:]) {
			if xc, ok := x.Cmd.(*syntax.CallExpr); !ok || len(xc.Args) == 0 || !literalPrint(fs.args(xc.Args)) {
				fs.dynamicAt(y.Args[0], "pipes text karpx cannot read statically into "+u[0].first())
			}
		}
	}
}

// literalPrint reports whether argv is echo or printf of literal words.
func literalPrint(argv []arg) bool {
	text, ok := printed(argv)
	return ok && !strings.Contains(text, unknown)
}

// checkDynamic records (dynamicAt) a simple command whose command name,
// or the script it runs (sh -c, eval, source, a here-document fed to a
// shell), the static scan cannot resolve to literals.
func (fs *fileScan) checkDynamic(cmd *syntax.CallExpr, argv []arg, in stdin) {
	if fs.depth != 0 {
		return
	}
	u := unwrap(argv)
	if len(u) == 0 {
		return
	}
	lit := func(a arg) bool {
		for _, v := range a.vals {
			if strings.Contains(v, unknown) {
				return false
			}
		}
		return true
	}
	w := cmd.Args[0]
	if !lit(u[0]) {
		fs.dynamicAt(w, fmt.Sprintf("%s runs a command whose name is not literal", wordSource(w)))
		return
	}
	name := path.Base(u[0].first())
	rest := u[1:]
	switch {
	case name == "eval":
		for _, a := range rest {
			if !lit(a) {
				fs.dynamicAt(w, "eval runs a script that is not literal")
				return
			}
		}
	case name == "source" || name == ".":
		if len(rest) > 0 && !lit(rest[0]) {
			fs.dynamicAt(w, name+" reads a file whose name is not literal")
		}
	case shells[name] || name == "su" || name == "runuser" || name == "at" || name == "batch":
		for i, a := range rest {
			if (a.first() == "-c" || a.first() == "--command" || (shells[name] && strings.HasPrefix(a.first(), "-") && !strings.HasPrefix(a.first(), "--") && strings.HasSuffix(a.first(), "c"))) && i+1 < len(rest) {
				if !lit(rest[i+1]) {
					fs.dynamicAt(w, name+" runs a script that is not literal")
				}
				return
			}
		}
		if in.ok && strings.Contains(in.text, unknown) {
			fs.dynamicAt(w, name+" reads a script that is not literal")
		}
		if ops := operandsOf(rest); shells[name] && len(ops) > 0 && !lit(ops[0]) {
			fs.dynamicAt(w, name+" runs a script file whose name is not literal")
		}
	}
}

// operandsOf returns the arguments that are not options.
func operandsOf(args []arg) []arg {
	var out []arg
	for _, a := range args {
		if !strings.HasPrefix(a.first(), "-") {
			out = append(out, a)
		}
	}
	return out
}

// mattering are the command names whose lines the scan judges: wrappers,
// shells and script runners, and every command restartWhat and pipe know.
// Other commands without redirections (echo, mkdir, yum, …) are skipped
// without expanding their arguments.
var mattering = setOf("sudo", "doas", "env", "nohup", "builtin", "setsid", "time", "exec", "nocache", "caffeinate",
	"systemd-inhibit", "command", "nice", "ionice", "chrt", "taskset", "stdbuf", "flock", "unshare", "nsenter", "chroot",
	"cloud-init-per", "timeout", "watch", "systemd-run", "xargs", "busybox",
	"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "source", ".", "eval", "su", "runuser", "at", "batch", "tee",
	"reboot", "poweroff", "halt", "shutdown", "kexec", "init", "telinit", "systemctl", "service", "invoke-rc.d",
	"rc-service", "initctl", "kubelet", "containerd", "kill", "pkill", "killall", "skill", "killall5",
	"busctl", "dbus-send", "gdbus", "qdbus")
