package lint

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// unwrap strips the commands that run their arguments as a command
// (sudo, env, nohup, timeout 5, systemd-run --on-active=60, …) and
// returns the wrapped command line (nil when there is none, or when the
// wrapper only looks the command up: command -v).
func unwrap(argv []arg) []arg {
	for len(argv) > 0 {
		name := path.Base(argv[0].first())
		rest := argv[1:]
		w, ok := wrapperOf(name)
		if !ok {
			return argv
		}
		switch name {
		case "env":
			// env -S "reboot now" splits its argument into words.
			if words, ok := splitString(rest); ok {
				return unwrap(words)
			}
		case "command":
			for _, a := range rest {
				if a.first() == "-v" || a.first() == "-V" {
					return nil // only looks the command up
				}
			}
		}
		i := w.commandIndex(name, rest)
		if i >= len(rest) {
			return nil
		}
		argv = rest[i:]
	}
	return argv
}

// wrapper is the syntax of a command that runs its arguments as a command.
type wrapper struct {
	// valued are the wrapper's options that take a value.
	valued map[string]bool
	// positional is the number of the wrapper's positional arguments
	// before the command.
	positional int
}

// wrapperOf returns the syntax of the wrapper name (a base name), false
// when name runs no command.
func wrapperOf(name string) (wrapper, bool) {
	var w wrapper
	switch name {
	case "sudo", "doas":
		w.valued = setOf("-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group", "--chdir", "--prompt", "--role", "--type", "--other-user", "--close-from", "--command-timeout", "--host")
	case "env":
		w.valued = setOf("-u", "-C", "--unset", "--chdir", "-S", "--split-string")
	case "nohup", "builtin", "setsid", "time", "exec", "nocache", "caffeinate", "systemd-inhibit":
		w.valued = setOf("-a", "--what", "--who", "--why", "--mode")
	case "command":
	case "nice", "ionice", "chrt", "taskset", "stdbuf", "flock", "unshare", "nsenter":
		w.valued = setOf("-n", "-c", "-p", "-i", "-o", "-e", "-w", "-E", "-t", "--adjustment", "--class", "--classdata", "--timeout", "--target")
		if name == "flock" || name == "chrt" || name == "taskset" {
			w.positional = 1
		}
	case "chroot":
		w.positional = 1
	case "cloud-init-per":
		w.positional = 2 // cloud-init-per FREQUENCY NAME CMD…
	case "timeout":
		w.valued = setOf("-s", "-k", "--signal", "--kill-after")
		w.positional = 1
	case "watch":
		w.valued = setOf("-n", "-d", "--interval", "--differences")
	case "systemd-run":
		w.valued = setOf("-u", "--unit", "-p", "--property", "--description", "--slice", "-E", "--setenv", "--uid", "--gid", "--nice", "--working-directory", "-M", "--machine", "-H", "--host",
			"--on-active", "--on-boot", "--on-startup", "--on-unit-active", "--on-unit-inactive", "--on-calendar", "--on-timezone-change", "--on-clock-change", "--timer-property", "--path-property", "--socket-property", "--service-type")
	case "xargs":
		w.valued = setOf("-n", "-I", "-i", "-P", "-L", "-l", "-d", "-a", "-s", "-E", "-e", "--max-args", "--max-procs", "--max-lines", "--delimiter", "--arg-file", "--max-chars", "--eof", "--replace")
	case "busybox":
		// busybox APPLET args
	default:
		return w, false
	}
	return w, true
}

// splitString returns the command line of env's arguments rest when they
// hold -S/--split-string WORDS: WORDS split on blanks, then what follows.
func splitString(rest []arg) ([]arg, bool) {
	for i, a := range rest {
		if (a.first() == "-S" || a.first() == "--split-string") && i+1 < len(rest) {
			var words []arg
			for _, f := range strings.Fields(rest[i+1].first()) {
				words = append(words, arg{vals: []string{f}})
			}
			return append(words, rest[i+2:]...), true
		}
	}
	return nil, false
}

// commandIndex returns the index in rest (the arguments of the wrapper
// name) of the wrapped command: past the options (and their values), the
// NAME=value assignments of env and sudo, "--" and the positional
// arguments; len(rest) or more when there is no command.
func (w wrapper) commandIndex(name string, rest []arg) int {
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
		if w.valued[v] && i < len(rest) {
			i++
		}
	}
	if w.positional > 0 && i+w.positional <= len(rest) {
		i += w.positional
	}
	return i
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
	if what := swapWhat(name, args); what != "" {
		fs.sc.add(ruleSwapOn, line, what)
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
