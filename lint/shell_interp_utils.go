package lint

import (
	"fmt"
	"io"
	"path"
	"strings"

	"mvdan.cc/sh/v3/interp"
)

// This file holds the sandbox's commands (shell_interp.go): the ones that
// start scripts (shells, at, su -c, xargs, crontab, systemctl on a unit
// file the script wrote), the pure utilities that build commands (base64,
// gzip, tr, sed's s command, cat, tee, which, cp, install, mv, ln), and
// every other command, which is recorded and answered with a taint mark.

// inProcessNoOps change nothing the sandbox models (permissions, owners,
// directories, logging, sleeping).
var inProcessNoOps = setOf("chmod", "chown", "chgrp", "mkdir", "touch", "sleep", "logger", "sync", "rmdir", "chattr",
	"restorecon", "chcon", "setfacl", "true", "false", "date")

// utility runs command name with args (after wrappers) on behalf of the
// script, at line of the top script. It is long because it is the one
// dispatch table of every command the sandbox implements in process: one
// short case per command family, each handing off to its function, so
// that which utility is modelled, and how, reads in one place.
func (r *run) utility(hc interp.HandlerContext, name string, args []string, line int) error {
	sb := r.sb
	switch {
	case shells[name]:
		return r.shell(hc, name, args, line)
	case name == "at" || name == "batch":
		in, err := sb.readAll(hc.Stdin)
		if err != nil {
			return err
		}
		if f := fileArg(args, setOf("-f")); f != "" {
			in = r.readFile(hc, f)
		}
		sb.runText(in, line, name+" job")
		return nil
	case name == "su" || name == "runuser":
		for i, a := range args {
			if (a == "-c" || a == "--command") && i+1 < len(args) {
				sb.runText(args[i+1], line, name+" -c")
			}
		}
		return nil
	case name == "xargs":
		return r.xargs(hc, args, line)
	case name == "crontab":
		return r.crontab(hc, args, line)
	case name == "systemctl":
		for _, a := range args {
			if strings.Contains(a, "/") {
				if vf, ok := sb.file(absPath(hc.Dir, a)); ok {
					for _, c := range unitCommands(vf.content) {
						sb.runText(c, line, "systemd unit "+a)
					}
				}
			}
		}
		return nil
	case inProcessNoOps[name]:
		return nil
	case name == "which":
		for _, a := range args {
			if !strings.HasPrefix(a, "-") {
				fmt.Fprintf(hc.Stdout, "/usr/bin/%s\n", path.Base(a))
			}
		}
		return nil
	case name == "cat":
		return r.cat(hc, args)
	case name == "tee":
		return r.tee(hc, args, line)
	case name == "base64":
		return r.base64(hc, args)
	case name == "gzip" || name == "gunzip" || name == "zcat":
		return r.gzip(hc, name, args)
	case name == "tr":
		return r.tr(hc, args)
	case name == "sed":
		return r.sed(hc, args, line)
	case name == "cp" || name == "install" || name == "mv" || name == "ln":
		return r.copy(hc, name, args, line)
	case name == "rm":
		for _, a := range args {
			if agent := agentMentioned(path.Base(a)); agent != "" && strings.HasPrefix(a, "/") && strings.Contains(a, "systemd") {
				sb.add(RuleUserDataNodeRestart, line, "rm of "+agent+"'s unit "+a+r.suffix())
			}
		}
		return nil
	}
	// Any other program: its effect on files is unknown (curl -o, tar -C,
	// aws s3 cp), so every absolute path among its arguments is a file
	// whose content karpx cannot know; its output is a taint mark.
	for _, a := range args {
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(v, "/") {
			a = v
		}
		if strings.HasPrefix(a, "/") && !strings.HasPrefix(a, "/dev/") && !strings.HasPrefix(a, "/proc/") {
			p := path.Clean(a)
			if _, ok := sb.file(p); !ok {
				if err := sb.writeFile(p, sb.mark("the file "+p+" as "+name+" leaves it"), line); err != nil {
					return err
				}
			}
		}
	}
	_, _ = io.WriteString(hc.Stdout, sb.mark("the output of "+name))
	return nil
}

// fileArg returns the value of the first of opts in args, or "".
func fileArg(args []string, opts map[string]bool) string {
	for i, a := range args {
		if opts[a] && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// operands returns args without options; valued options take the next
// word.
func operands(args []string, valued map[string]bool) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i+1:]...)
		case strings.HasPrefix(a, "-") && a != "-":
			if valued[a] {
				i++
			}
		default:
			out = append(out, a)
		}
	}
	return out
}

// readFile returns the content of the file p: what the script wrote, or a
// taint mark.
func (r *run) readFile(hc interp.HandlerContext, p string) string {
	if p == "-" {
		s, _ := r.sb.readAll(hc.Stdin)
		return s
	}
	ap := absPath(hc.Dir, p)
	if vf, ok := r.sb.file(ap); ok {
		return vf.content
	}
	return r.sb.mark("the file " + ap)
}

// input is the text a filter reads: its file operands, else its standard
// input.
func (r *run) input(hc interp.HandlerContext, files []string) (string, error) {
	if len(files) == 0 {
		return r.sb.readAll(hc.Stdin)
	}
	var b strings.Builder
	for _, f := range files {
		b.WriteString(r.readFile(hc, f))
	}
	return b.String(), nil
}

// shell runs sh -c SCRIPT, sh FILE or sh reading standard input.
func (r *run) shell(hc interp.HandlerContext, name string, args []string, line int) error {
	sb := r.sb
	for i, a := range args {
		if a == "-c" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.HasSuffix(a, "c")) {
			if i+1 < len(args) {
				sb.runText(args[i+1], line, name+" -c")
			}
			return nil
		}
	}
	if ops := operands(args, setOf("-o", "+o", "-O", "+O", "--rcfile", "--init-file")); len(ops) > 0 && ops[0] != "-" {
		sb.runImageFile(absPath(hc.Dir, ops[0]), line, "file", "process substitution")
		return nil // a script of the AMI: part of the image, like its programs
	}
	in, err := sb.readAll(hc.Stdin)
	if err != nil {
		return err
	}
	sb.runText(in, line, "standard input of "+name)
	return nil
}

// xargs runs its command once with the words of its standard input.
func (r *run) xargs(hc interp.HandlerContext, args []string, line int) error {
	valued := setOf("-n", "-L", "-P", "-s", "-d", "-E", "-a", "--max-args", "--max-procs", "--delimiter", "--arg-file")
	i := 0
	replace := ""
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		switch {
		case args[i] == "-I" && i+1 < len(args):
			replace = args[i+1]
			i++
		case strings.HasPrefix(args[i], "-I") && len(args[i]) > 2:
			replace = args[i][2:]
		case valued[args[i]]:
			i++
		}
		i++
	}
	cmd := []string{"echo"}
	if i < len(args) {
		cmd = append([]string(nil), args[i:]...)
	}
	in, err := r.sb.readAll(hc.Stdin)
	if err != nil {
		return err
	}
	words := strings.Fields(in)
	if replace != "" {
		for j := range cmd {
			cmd[j] = strings.ReplaceAll(cmd[j], replace, strings.Join(words, " "))
		}
	} else {
		cmd = append(cmd, words...)
	}
	return r.execArgs(hc, cmd, line)
}

// execArgs runs argv as the exec handler would, from a utility.
func (r *run) execArgs(hc interp.HandlerContext, argv []string, line int) error {
	r.sb.record(argv)
	if what := r.sb.tainted(argv[0]); what != "" {
		r.sb.add(ruleUnresolved, line, "runs a command whose name comes from "+what)
		return nil
	}
	u := unwrap(toArgs(argv))
	if len(u) == 0 {
		return nil
	}
	if what := r.sb.tainted(u[0].first()); what != "" {
		r.sb.add(ruleUnresolved, line, "runs a command whose name comes from "+what)
		return nil
	}
	name := path.Base(u[0].first())
	if what := restartWhat(name, u[1:]); what != "" {
		r.sb.add(RuleUserDataNodeRestart, line, what+r.suffix())
	}
	if what := swapWhat(name, u[1:]); what != "" {
		r.sb.add(ruleSwapOn, line, what+r.suffix())
	}
	rest := make([]string, len(u)-1)
	for j, a := range u[1:] {
		rest[j] = a.first()
	}
	return r.utility(hc, name, rest, line)
}

// crontab installs a user's table from a file or standard input.
func (r *run) crontab(hc interp.HandlerContext, args []string, line int) error {
	for _, a := range args {
		if a == "-l" || a == "-r" || a == "-e" {
			return nil
		}
	}
	ops := operands(args, setOf("-u"))
	text := ""
	if len(ops) == 0 || ops[0] == "-" {
		in, err := r.sb.readAll(hc.Stdin)
		if err != nil {
			return err
		}
		text = in
	} else {
		text = r.readFile(hc, ops[0])
	}
	if what := r.sb.tainted(text); what != "" {
		r.sb.add(ruleUnresolved, line, "installs a crontab built from "+what)
		return nil
	}
	for _, c := range cronCommands(text, false) {
		r.sb.runText(c, line, "crontab")
	}
	return nil
}

func (r *run) cat(hc interp.HandlerContext, args []string) error {
	in, err := r.input(hc, operands(args, nil))
	if err != nil {
		return err
	}
	_, err = io.WriteString(hc.Stdout, in)
	return err
}

func (r *run) tee(hc interp.HandlerContext, args []string, line int) error {
	in, err := r.sb.readAll(hc.Stdin)
	if err != nil {
		return err
	}
	appendMode := false
	for _, a := range args {
		if a == "-a" || a == "--append" {
			appendMode = true
		}
	}
	for _, f := range operands(args, nil) {
		p := absPath(hc.Dir, f)
		if p == "/proc/sysrq-trigger" && sysrqDangerous(in) {
			r.sb.add(RuleUserDataNodeRestart, line, "tee /proc/sysrq-trigger"+r.suffix())
		}
		write := r.sb.writeFile
		if appendMode {
			write = r.sb.appendFile
		}
		if err := write(p, in, line); err != nil {
			return err
		}
	}
	_, err = io.WriteString(hc.Stdout, in)
	return err
}
