package lint

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

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
