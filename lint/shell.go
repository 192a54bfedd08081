package lint

import (
	"path"
	"regexp"
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
}

// shellSyntaxError is a script the parser rejects, at a 1-based line and
// column of the analysed text.
type shellSyntaxError struct {
	line, col int
	msg       string
}

var shellParsers = sync.Pool{New: func() any {
	return syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(false))
}}

// parseShell parses src as Bash.
func parseShell(src string) (*syntax.File, *shellSyntaxError) {
	p := shellParsers.Get().(*syntax.Parser)
	defer shellParsers.Put(p)
	f, err := p.Parse(strings.NewReader(src), "")
	if err != nil {
		if pe, ok := err.(syntax.ParseError); ok {
			return nil, &shellSyntaxError{line: int(pe.Pos.Line()), col: int(pe.Pos.Col()), msg: pe.Text}
		}
		if le, ok := err.(syntax.LangError); ok {
			return nil, &shellSyntaxError{line: int(le.Pos.Line()), col: int(le.Pos.Col()), msg: le.Error()}
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
	return nil
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

// pidOf returns the agent whose PID w expands to, or "".
func (fs *fileScan) pidOf(w *syntax.Word) string {
	if agent := pidLookup(w); agent != "" {
		return agent
	}
	agent := ""
	syntax.Walk(w, func(n syntax.Node) bool {
		if p, ok := n.(*syntax.ParamExp); ok && p.Param != nil && fs.pidVars[p.Param.Value] != "" {
			agent = fs.pidVars[p.Param.Value]
		}
		return agent == ""
	})
	return agent
}

// pidLookup returns the agent whose PID a command substitution in w
// prints: $(pidof kubelet), $(pgrep -f containerd), $(cat
// /run/containerd/containerd.pid), $(systemctl show -p MainPID kubelet).
func pidLookup(w *syntax.Word) string {
	agent := ""
	syntax.Walk(w, func(n syntax.Node) bool {
		cs, ok := n.(*syntax.CmdSubst)
		if !ok {
			return agent == ""
		}
		syntax.Walk(cs, func(n syntax.Node) bool {
			call, ok := n.(*syntax.CallExpr)
			if !ok || len(call.Args) == 0 {
				return agent == ""
			}
			switch path.Base(call.Args[0].Lit()) {
			case "pidof", "pgrep", "cat", "systemctl", "head", "tail":
				for _, a := range call.Args[1:] {
					if ag := agentMentioned(a.Lit()); ag != "" {
						agent = ag
					}
				}
			}
			return agent == ""
		})
		return agent == ""
	})
	return agent
}

// agentMentioned returns the node agent whose name s contains, or "".
func agentMentioned(s string) string {
	for _, a := range []string{"kubelet", "containerd"} {
		if strings.Contains(s, a) {
			return a
		}
	}
	return ""
}

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
		fs.pipe(x, fs.args(y.Args), fs.line(y.Args[0].Pos()))
	}
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
		fs.sc.add(RuleUserDataParse, err.line, "a nested script does not parse: "+err.msg)
	}
}

// wrappers strips the commands that run their arguments as a command
// (sudo, env, nohup, timeout 5, systemd-run --on-active=60, …) and
// returns the wrapped command line.
func unwrap(argv []arg) []arg {
	for len(argv) > 0 {
		name := path.Base(argv[0].first())
		rest := argv[1:]
		var valued map[string]bool // options of the wrapper that take a value
		positional := 0            // positional arguments of the wrapper before the command
		switch name {
		case "sudo", "doas":
			valued = setOf("-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group", "--chdir", "--prompt", "--role", "--type", "--other-user", "--close-from", "--command-timeout", "--host")
		case "env":
			valued = setOf("-u", "-C", "--unset", "--chdir", "-S", "--split-string")
			// env -S "reboot now" splits its argument into words.
			for i, a := range rest {
				if (a.first() == "-S" || a.first() == "--split-string") && i+1 < len(rest) {
					var words []arg
					for _, f := range strings.Fields(rest[i+1].first()) {
						words = append(words, arg{vals: []string{f}})
					}
					return unwrap(append(words, rest[i+2:]...))
				}
			}
		case "nohup", "builtin", "setsid", "time", "exec", "nocache", "caffeinate", "systemd-inhibit":
			valued = setOf("-a", "--what", "--who", "--why", "--mode")
		case "command":
			for _, a := range rest {
				if a.first() == "-v" || a.first() == "-V" {
					return nil // only looks the command up
				}
			}
		case "nice", "ionice", "chrt", "taskset", "stdbuf", "flock", "unshare", "nsenter":
			valued = setOf("-n", "-c", "-p", "-i", "-o", "-e", "-w", "-E", "-t", "--adjustment", "--class", "--classdata", "--timeout", "--target")
			if name == "flock" || name == "chrt" || name == "taskset" {
				positional = 1
			}
		case "chroot":
			positional = 1
		case "cloud-init-per":
			positional = 2 // cloud-init-per FREQUENCY NAME CMD…
		case "timeout":
			valued = setOf("-s", "-k", "--signal", "--kill-after")
			positional = 1
		case "watch":
			valued = setOf("-n", "-d", "--interval", "--differences")
		case "systemd-run":
			valued = setOf("-u", "--unit", "-p", "--property", "--description", "--slice", "-E", "--setenv", "--uid", "--gid", "--nice", "--working-directory", "-M", "--machine", "-H", "--host",
				"--on-active", "--on-boot", "--on-startup", "--on-unit-active", "--on-unit-inactive", "--on-calendar", "--on-timezone-change", "--on-clock-change", "--timer-property", "--path-property", "--socket-property", "--service-type")
		case "xargs":
			valued = setOf("-n", "-I", "-i", "-P", "-L", "-l", "-d", "-a", "-s", "-E", "-e", "--max-args", "--max-procs", "--max-lines", "--delimiter", "--arg-file", "--max-chars", "--eof", "--replace")
		case "busybox":
			// busybox APPLET args
		default:
			return argv
		}
		i := 0
		for i < len(rest) {
			v := rest[i].first()
			if v == "--" {
				i++
				break
			}
			if (name == "env" || name == "sudo") && strings.Contains(v, "=") && !strings.HasPrefix(v, "-") {
				i++ // env NAME=value, sudo NAME=value
				continue
			}
			if !strings.HasPrefix(v, "-") || v == "-" {
				break
			}
			i++
			if valued[v] && i < len(rest) {
				i++
			}
		}
		if positional > 0 && i+positional <= len(rest) {
			i += positional
		}
		if i >= len(rest) {
			return nil
		}
		argv = rest[i:]
	}
	return argv
}

func setOf(ss ...string) map[string]bool {
	m := make(map[string]bool, len(ss))
	for _, s := range ss {
		m[s] = true
	}
	return m
}

// shells are the interpreters whose -c argument, or standard input, is a
// shell script.
var shells = setOf("sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "busybox sh")

// command judges one simple command line.
func (fs *fileScan) command(argv []arg, line int, in stdin, redirs []*syntax.Redirect) {
	argv = unwrap(argv)
	if len(argv) == 0 {
		return
	}
	name := path.Base(argv[0].first())
	args := argv[1:]
	switch {
	case shells[name]:
		for i, a := range args {
			if a.first() == "-c" || (strings.HasPrefix(a.first(), "-") && !strings.HasPrefix(a.first(), "--") && strings.HasSuffix(a.first(), "c")) {
				if i+1 < len(args) {
					fs.httpIn(args[i+1:], line, name)
					fs.nested(args[i+1].first(), fs.line(args[i+1].word.Pos()))
				}
				return
			}
		}
		fs.httpIn(args, line, name)
		if in.ok {
			fs.nested(in.text, in.line)
		}
		return
	case name == "source" || name == ".":
		fs.httpIn(args, line, name)
		return
	case name == "eval":
		fs.httpIn(args, line, name)
		parts := make([]string, len(args))
		for i, a := range args {
			parts[i] = a.first()
		}
		if len(args) > 0 {
			fs.nested(strings.Join(parts, " "), fs.line(args[0].word.Pos()))
		}
		return
	case name == "su" || name == "runuser":
		for i, a := range args {
			if (a.first() == "-c" || a.first() == "--command") && i+1 < len(args) {
				fs.nested(args[i+1].first(), fs.line(args[i+1].word.Pos()))
			}
		}
		return
	case name == "at" || name == "batch":
		if in.ok {
			fs.nested(in.text, in.line)
		}
		return
	}
	if name == "kill" {
		for i := range args {
			if args[i].word != nil {
				args[i].pid = fs.pidOf(args[i].word) // only kill needs it: a walk per word
			}
		}
	}
	if what := restartWhat(name, args); what != "" {
		fs.sc.add(RuleUserDataNodeRestart, line, what)
	}
	_ = redirs
}

// httpIn reports KX007 when an argument of a shell, source or eval runs a
// plain-http download: bash <(curl http://…), sh -c "$(curl http://…)".
func (fs *fileScan) httpIn(args []arg, line int, name string) {
	for _, a := range args {
		if a.word != nil && runsHTTPDownload(a.word) {
			fs.sc.add(RuleUserDataHTTPPipe, line, name+" of a plain-http download")
			return
		}
	}
}

// runsHTTPDownload reports whether n holds a curl or wget of an http://
// URL.
func runsHTTPDownload(n syntax.Node) bool {
	found := false
	syntax.Walk(n, func(n syntax.Node) bool {
		if call, ok := n.(*syntax.CallExpr); ok && isHTTPDownload(call) {
			found = true
		}
		return !found
	})
	return found
}

func isHTTPDownload(call *syntax.CallExpr) bool {
	if len(call.Args) == 0 {
		return false
	}
	args := call.Args
	for len(args) > 0 {
		switch path.Base(args[0].Lit()) {
		case "sudo", "env", "nohup", "command", "timeout":
			args = args[1:]
			continue
		}
		break
	}
	if len(args) == 0 {
		return false
	}
	switch path.Base(args[0].Lit()) {
	case "curl", "wget", "fetch":
	default:
		return false
	}
	for _, a := range args[1:] {
		v := strings.ToLower(wordText(a))
		if strings.HasPrefix(v, "http://") || strings.Contains(v, "=http://") {
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

// pipe judges what flows through x | y: a literal script into a shell or
// at(1), a plain-http download into a shell, an agent's PID into xargs
// kill, text into tee /proc/sysrq-trigger.
func (fs *fileScan) pipe(x *syntax.Stmt, yargv []arg, line int) {
	y := unwrapNoXargs(yargv)
	if len(y) == 0 {
		return
	}
	name := path.Base(y[0].first())
	xcall, _ := x.Cmd.(*syntax.CallExpr)
	var xargv []arg
	if xcall != nil && len(xcall.Args) > 0 {
		xargv = unwrap(fs.args(xcall.Args))
	}
	switch {
	case shells[name] && !hasDashC(y[1:]):
		if xcall != nil && isHTTPDownload(xcall) {
			fs.sc.add(RuleUserDataHTTPPipe, line, "plain-http download piped to "+name)
			return
		}
		if text, ok := printed(xargv); ok {
			fs.nested(text, line)
		}
	case name == "at" || name == "batch":
		if text, ok := printed(xargv); ok {
			fs.nested(text, line)
		}
	case name == "xargs":
		rest := unwrap(y)
		if len(rest) == 0 || len(xargv) == 0 {
			return
		}
		switch path.Base(xargv[0].first()) {
		case "pidof", "pgrep":
			agent := ""
			for _, a := range xargv[1:] {
				if ag := agentMentioned(a.first()); ag != "" {
					agent = ag
				}
			}
			if agent == "" {
				return
			}
			if k := path.Base(rest[0].first()); k == "kill" && !signalZero(rest[1:]) {
				fs.sc.add(RuleUserDataNodeRestart, line, "kill "+agent+" (PID from "+path.Base(xargv[0].first())+")")
			}
		default:
			// echo kubelet | xargs systemctl restart
			if text, ok := printed(xargv); ok {
				extra := strings.Fields(text)
				full := append([]arg{}, rest...)
				for _, e := range extra {
					full = append(full, arg{vals: []string{e}})
				}
				if what := restartWhat(path.Base(full[0].first()), full[1:]); what != "" {
					fs.sc.add(RuleUserDataNodeRestart, line, what)
				}
			}
		}
	case name == "tee":
		for _, a := range y[1:] {
			if a.first() == sysrqTrigger {
				text, ok := printed(xargv)
				if !ok || sysrqDangerous(text) {
					fs.sc.add(RuleUserDataNodeRestart, line, "write to "+sysrqTrigger)
				}
			}
		}
		if text, ok := printed(xargv); ok {
			for _, a := range y[1:] {
				if !strings.HasPrefix(a.first(), "-") {
					fs.fileWrite(a.first(), text, line)
				}
			}
		}
	}
}

// unwrapNoXargs is unwrap without stripping xargs, whose input matters.
func unwrapNoXargs(argv []arg) []arg {
	for len(argv) > 0 && path.Base(argv[0].first()) != "xargs" {
		next := unwrap(argv)
		if len(next) == len(argv) {
			return argv
		}
		argv = next
	}
	return argv
}

func hasDashC(args []arg) bool {
	for _, a := range args {
		if a.first() == "-c" {
			return true
		}
	}
	return false
}

// printed returns what echo or printf with literal arguments print.
func printed(argv []arg) (string, bool) {
	if len(argv) == 0 {
		return "", false
	}
	name := path.Base(argv[0].first())
	if name != "echo" && name != "printf" {
		return "", false
	}
	var parts []string
	for i, a := range argv[1:] {
		v := a.first()
		if name == "echo" && i == len(parts) && strings.HasPrefix(v, "-") && strings.Trim(v, "-neE") == "" {
			continue
		}
		if strings.Contains(v, unknown) {
			return "", false
		}
		parts = append(parts, v)
	}
	text := strings.Join(parts, " ")
	text = strings.ReplaceAll(text, `\n`, "\n")
	return text, true
}

const sysrqTrigger = "/proc/sysrq-trigger"

// sysrqDangerous reports whether writing text to /proc/sysrq-trigger
// reboots (b), powers off (o), crashes (c) the node or kills every process
// (e, i, k) (Linux kernel documentation, "Linux Magic System Request Key
// Hacks").
func sysrqDangerous(text string) bool {
	t := strings.TrimSpace(text)
	return t == "" || strings.ContainsAny(t[:1], "boceik"+unknown)
}

// redirects judges output redirections of a command: writing a dangerous
// key to /proc/sysrq-trigger, and writing a script to a path executed at
// boot (echo "@reboot root reboot" >> /etc/crontab, cat > unit <<EOF).
func (fs *fileScan) redirects(argv []arg, redirs []*syntax.Redirect, line int) {
	var in stdin
	for _, r := range redirs {
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			if r.Hdoc != nil {
				in = stdin{text: fs.values(r.Hdoc)[0], line: fs.line(r.Hdoc.Pos()), ok: true}
			}
		case syntax.WordHdoc:
			in = stdin{text: fs.values(r.Word)[0], line: fs.line(r.Word.Pos()), ok: true}
		}
	}
	cmd := unwrap(argv)
	for _, r := range redirs {
		switch r.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.RdrAll, syntax.AppAll:
		default:
			continue
		}
		target := fs.values(r.Word)[0]
		text, ok := printed(cmd)
		if !ok && len(cmd) > 0 && path.Base(cmd[0].first()) == "cat" && in.ok {
			text, ok = in.text, true
		}
		if target == sysrqTrigger && (!ok || sysrqDangerous(text)) {
			fs.sc.add(RuleUserDataNodeRestart, line, "write to "+sysrqTrigger)
			continue
		}
		if ok {
			fs.fileWrite(target, text, line)
		}
	}
	// tee FILE <<EOF
	if len(cmd) > 0 && path.Base(cmd[0].first()) == "tee" && in.ok {
		for _, a := range cmd[1:] {
			if !strings.HasPrefix(a.first(), "-") {
				fs.fileWrite(a.first(), in.text, line)
			}
		}
	}
}

// fileWrite analyses content written to p when p is executed at boot.
func (fs *fileScan) fileWrite(p, content string, line int) {
	if fs.depth >= maxShellDepth {
		return
	}
	script, kind := bootScript(p, content)
	if kind == "" {
		return
	}
	sub := &shellScan{}
	for _, s := range script {
		if err := sub.script(s, 1, fs.depth+1); err != nil {
			continue // a file written at boot is not run by this script's shell
		}
	}
	for _, e := range sub.effects {
		if e.rule == RuleUserDataNodeRestart || e.rule == RuleUserDataHTTPPipe {
			fs.sc.add(e.rule, line, e.what+" (in "+kind+" "+p+")")
		}
	}
}

// restartWhat names what the command name args does to kubelet,
// containerd or the machine, or returns "".
func restartWhat(name string, args []arg) string {
	switch name {
	case "reboot", "poweroff", "halt":
		for _, a := range args {
			if a.is("-w", "--wtmp-only", "--help", "--version") {
				return ""
			}
		}
		return name
	case "shutdown":
		for _, a := range args {
			if a.is("-c", "-k", "--help", "--show") {
				return ""
			}
		}
		return strings.TrimSpace("shutdown " + joinFirst(args))
	case "kexec":
		exec, load := false, false
		for _, a := range args {
			switch {
			case a.is("-e", "--exec", "-f", "--force"):
				exec = true
			case a.is("-l", "--load", "-p", "--load-panic", "-u", "--unload", "-S", "--status", "-h", "--help", "-v", "--version"):
				load = true
			}
		}
		if exec || !load {
			return "kexec"
		}
	case "init", "telinit":
		if n := nonOptionArgs(args); len(n) > 0 && n[0].is("0", "6", "1", "s", "S", "single") {
			return name + " " + n[0].first()
		}
	case "systemctl":
		return systemctlWhat(args)
	case "service", "invoke-rc.d", "rc-service", "initctl":
		n := nonOptionArgs(args)
		if name == "initctl" && len(n) >= 2 {
			n = []arg{n[1], n[0]} // initctl stop kubelet
		}
		if len(n) >= 2 {
			if agent := isAgentUnit(n[0]); agent != "" {
				for _, v := range n[1].vals {
					if agentActions[v] {
						return name + " " + agent + " " + v
					}
				}
			}
		}
	case "kubelet", "containerd":
		// /etc/init.d/kubelet restart
		if n := nonOptionArgs(args); len(n) == 1 {
			for _, v := range n[0].vals {
				if agentActions[v] {
					return name + " " + v
				}
			}
		}
	case "kill":
		if signalZero(args) {
			return ""
		}
		for _, a := range args {
			if a.pid != "" {
				return "kill " + a.pid
			}
		}
	case "pkill", "killall", "skill":
		return pkillWhat(name, args)
	case "killall5":
		if !signalZero(args) {
			return "killall5"
		}
	case "busctl", "dbus-send", "gdbus", "qdbus":
		return dbusWhat(name, args)
	}
	return ""
}

var agentActions = setOf("stop", "restart", "force-reload", "condrestart", "try-restart", "force-stop", "zap")

func joinFirst(args []arg) string {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = strings.ReplaceAll(a.first(), unknown, "…")
	}
	return strings.Join(parts, " ")
}

func nonOptionArgs(args []arg) []arg {
	var out []arg
	for _, a := range args {
		if !strings.HasPrefix(a.first(), "-") {
			out = append(out, a)
		}
	}
	return out
}

// signalZero reports a kill that only probes (kill -0, -s 0) or lists
// signals (-l, -L).
func signalZero(args []arg) bool {
	for i, a := range args {
		switch {
		case a.is("-0", "-l", "-L", "--list", "--signal=0", "-SIG0"):
			return true
		case a.is("-s", "-n", "--signal") && i+1 < len(args) && args[i+1].is("0"):
			return true
		}
	}
	return false
}

// isAgentUnit returns the agent a unit name or glob names (kubelet,
// kubelet.service, containerd.service, 'kube*'), or "".
func isAgentUnit(a arg) string {
	for _, v := range a.vals {
		if strings.Contains(v, unknown) {
			continue
		}
		u := v
		for _, suf := range []string{".service", ".socket", ".scope"} {
			u = strings.TrimSuffix(u, suf)
		}
		for _, agent := range []string{"kubelet", "containerd"} {
			if u == agent {
				return agent
			}
			if strings.ContainsAny(v, "*?[") {
				if ok, _ := path.Match(v, agent+".service"); ok {
					return agent
				}
				if ok, _ := path.Match(v, agent); ok {
					return agent
				}
			}
		}
	}
	return ""
}

// Systemd knowledge (systemctl(1), systemd.special(7)).
var (
	// systemctl verbs that stop, kill, restart or keep a unit from running.
	systemctlAgentVerbs = setOf("restart", "stop", "kill", "try-restart", "reload-or-restart", "try-reload-or-restart",
		"condrestart", "force-reload", "mask", "freeze", "disable", "clean", "reenable")
	// systemctl verbs that take the whole machine down or out of service.
	systemctlPowerVerbs = setOf("reboot", "poweroff", "halt", "kexec", "soft-reboot", "rescue", "emergency",
		"suspend", "hibernate", "hybrid-sleep", "suspend-then-hibernate", "sleep", "exit", "switch-root")
	// systemctl verbs that start (or make default) a unit: with a
	// power-state target they reboot or stop the node.
	systemctlStartVerbs = setOf("start", "restart", "isolate", "reload-or-restart", "try-restart", "set-default", "enable", "try-reload-or-restart")
	// power-state units, without their .target/.service suffix.
	powerUnits = setOf("reboot", "poweroff", "halt", "kexec", "soft-reboot", "ctrl-alt-del", "rescue", "emergency",
		"shutdown", "final", "suspend", "hibernate", "hybrid-sleep", "suspend-then-hibernate", "sleep",
		"systemd-reboot", "systemd-poweroff", "systemd-halt", "systemd-kexec", "systemd-soft-reboot",
		"systemd-suspend", "systemd-hibernate", "exit", "systemd-exit")
	// systemctl options that take a value as the next word.
	systemctlValued = setOf("-t", "--type", "-p", "--property", "-s", "--signal", "-H", "--host", "-M", "--machine",
		"-n", "--lines", "-o", "--output", "--job-mode", "--root", "--kill-whom", "--kill-value", "--what",
		"--boot-loader-menu", "--boot-loader-entry", "--reboot-argument", "--timestamp", "--message", "--state",
		"--preset-mode", "--image", "--drop-in", "--when", "--image-policy", "--check-inhibitors")
)

func systemctlWhat(args []arg) string {
	var verb string
	var units []arg
	now := false
	for i := 0; i < len(args); i++ {
		v := args[i].first()
		switch {
		case v == "--now":
			now = true
		case strings.HasPrefix(v, "-"):
			if systemctlValued[v] && i+1 < len(args) {
				i++
			}
		case verb == "":
			verb = v
		default:
			units = append(units, args[i])
		}
	}
	_ = now
	if systemctlPowerVerbs[verb] {
		return "systemctl " + verb
	}
	if systemctlStartVerbs[verb] {
		for _, u := range units {
			for _, v := range u.vals {
				base := strings.TrimSuffix(strings.TrimSuffix(v, ".target"), ".service")
				if powerUnits[base] {
					if verb == "enable" {
						continue // enabling a target does not start it
					}
					return "systemctl " + verb + " " + v
				}
			}
		}
	}
	if systemctlAgentVerbs[verb] {
		for _, u := range units {
			if agent := isAgentUnit(u); agent != "" {
				return "systemctl " + verb + " " + agent
			}
		}
	}
	return ""
}

// pkillWhat judges pkill PATTERN, killall NAME (-r REGEX) and skill.
func pkillWhat(name string, args []arg) string {
	if signalZero(args) {
		return ""
	}
	valued := setOf("-s", "--signal", "-u", "-U", "-G", "-g", "-P", "-t", "--euid", "--uid", "--group", "--pgroup",
		"--parent", "--terminal", "--session", "--ns", "--nslist", "-o", "-y", "--older-than", "--younger-than", "--user", "-n", "-c", "--context", "--cgroup")
	regex, exact, full, ignoreCase := name == "pkill", name == "killall" || name == "skill", false, false
	var patterns []arg
	for i := 0; i < len(args); i++ {
		v := args[i].first()
		switch {
		case v == "-F" || v == "--pidfile":
			if i+1 < len(args) {
				if ag := agentMentioned(args[i+1].first()); ag != "" {
					return name + " -F " + args[i+1].first()
				}
				i++
			}
		case v == "-r" || v == "--regexp":
			regex, exact = true, false
		case v == "-x" || v == "--exact":
			exact = true
		case v == "-f" || v == "--full":
			full = true
		case v == "-I" || v == "--ignore-case" || v == "-i" && name == "pkill":
			ignoreCase = true
		case strings.HasPrefix(v, "-"):
			if valued[v] && i+1 < len(args) {
				i++
			}
		default:
			patterns = append(patterns, args[i])
		}
	}
	for _, p := range patterns {
		for _, v := range p.vals {
			if strings.Contains(v, unknown) {
				continue
			}
			for _, agent := range []string{"kubelet", "containerd"} {
				if processMatches(v, agent, regex, exact, full, ignoreCase) {
					return name + " " + v
				}
			}
		}
	}
	return ""
}

// processMatches reports whether pkill/killall's pattern selects the
// agent's process (name "kubelet", command line "/usr/bin/kubelet …").
func processMatches(pattern, agent string, regex, exact, full, ignoreCase bool) bool {
	subjects := []string{agent}
	if full {
		subjects = append(subjects, "/usr/bin/"+agent+" --config /etc/"+agent)
	}
	if !regex {
		if ignoreCase {
			return strings.EqualFold(pattern, agent) || strings.EqualFold(path.Base(pattern), agent)
		}
		return pattern == agent || path.Base(pattern) == agent
	}
	expr := pattern
	if exact {
		expr = "^(" + expr + ")$"
	}
	if ignoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return strings.Contains(pattern, agent)
	}
	for _, s := range subjects {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// dbusWhat judges D-Bus calls to logind's Reboot/PowerOff/Halt and to
// systemd's StopUnit/RestartUnit/KillUnit of an agent (org.freedesktop.
// login1.Manager and org.freedesktop.systemd1.Manager, systemd's D-Bus API).
func dbusWhat(name string, args []arg) string {
	methods := setOf("Reboot", "PowerOff", "Halt", "KExec", "SoftReboot", "RebootWithFlags", "PowerOffWithFlags", "HaltWithFlags", "KExecWithFlags", "SoftRebootWithFlags", "Suspend", "Hibernate")
	unitMethods := setOf("StopUnit", "RestartUnit", "KillUnit", "TryRestartUnit", "ReloadOrRestartUnit", "MaskUnitFiles", "DisableUnitFiles")
	power, unitCall := "", false
	for _, a := range args {
		v := a.first()
		m := v[strings.LastIndexByte(v, '.')+1:]
		switch {
		case methods[m] && (methods[v] || strings.Contains(v, "login1") || strings.Contains(v, "systemd1")):
			power = m
		case unitMethods[m]:
			unitCall = true
		}
	}
	if power != "" {
		return name + " " + power
	}
	if unitCall {
		for _, a := range args {
			v := strings.TrimPrefix(a.first(), "string:")
			if ag := isAgentUnit(arg{vals: []string{v}}); ag != "" {
				return name + " stop/restart " + ag
			}
		}
	}
	return ""
}
