package lint

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"runtime"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// exec runs f in a fresh interpreter bound to the sandbox.
func (sb *sandbox) exec(r *run, f *syntax.File) {
	if sb.ctx.Err() != nil {
		_ = sb.halt(fmt.Sprintf("it runs longer than %v", maxInterpTime))
		return
	}
	if why := prepare(f); why != "" {
		_ = sb.halt(why)
		return
	}
	runner, err := interp.New(
		interp.Env(sandboxEnv{sb: sb}),
		// Not interp.Dir, which stats the real directory: the sandbox's
		// working directory is virtual, and need not exist where karpx runs.
		func(r *interp.Runner) error { r.Dir = "/root"; return nil },
		interp.StdIO(nil, &limitWriter{sb: sb}, &limitWriter{sb: sb}), // nil: no os.Pipe for an empty input
		interp.CallHandler(r.call),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return r.execCmd }),
		interp.OpenHandler(r.open),
		interp.StatHandler(r.stat),
		interp.ReadDirHandler2(func(context.Context, string) ([]fs.DirEntry, error) { return nil, nil }),
		interp.AccessHandler(r.access),
	)
	if err != nil {
		_ = sb.halt("the interpreter cannot start: " + err.Error())
		return
	}
	err = runner.Run(sb.ctx, f)
	if sb.ctx.Err() != nil {
		_ = sb.halt(fmt.Sprintf("it runs longer than %v", maxInterpTime))
	}
	_ = err // exit statuses and a stopped run are the script's business
}

// limitWriter is the sandbox's standard output and error: discarded,
// counted against maxInterpBytes.
type limitWriter struct{ sb *sandbox }

func (w *limitWriter) Write(p []byte) (int, error) {
	if err := w.sb.charge(len(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// call runs before every simple command: it counts steps, bounds the
// interpreter's recursion and the size of variables, and hands source and
// command -v to the exec handler.
func (r *run) call(ctx context.Context, args []string) ([]string, error) {
	sb := r.sb
	switch args[0] {
	case pipeEnd, pipeEnter, pipeLeave, procSubstEnd:
		return args, nil // not a step: part of a pipeline or substitution
	}
	sb.mu.Lock()
	sb.steps++
	steps, halted := sb.steps, sb.halted != ""
	sb.mu.Unlock()
	if halted {
		// Another side of a pipe, or a substitution whose error the
		// interpreter does not pass up, passed a bound: stop here too.
		return nil, errInterpBound
	}
	if steps > maxInterpSteps {
		return nil, sb.halt(fmt.Sprintf("it runs more than %d commands", maxInterpSteps))
	}
	var pc [1]uintptr
	if steps%8 == 0 && runtime.Callers(maxShellParseFrames, pc[:]) > 0 {
		return nil, sb.halt("its functions or nested scripts recurse deeper than karpx follows")
	}
	hc := interp.HandlerCtx(ctx)
	if b, ok := hc.Stdout.(interface{ Len() int }); ok && b.Len() > maxInterpBytes {
		return nil, sb.halt(fmt.Sprintf("a command substitution outputs more than %d bytes", maxInterpBytes))
	}
	size := 0
	hc.Env.Each(func(_ string, v expand.Variable) bool {
		size += len(v.Str)
		for _, s := range v.List {
			size += len(s)
		}
		for k, s := range v.Map {
			size += len(k) + len(s)
		}
		return size <= maxInterpVarBytes
	})
	if size > maxInterpVarBytes {
		return nil, sb.halt(fmt.Sprintf("its variables hold more than %d bytes", maxInterpVarBytes))
	}
	if r.origin == 0 && hc.Pos.IsValid() {
		r.cur.Store(int64(r.line(hc.Pos)))
		sb.mu.Lock()
		sb.executed[hc.Pos.Offset()] = true
		sb.mu.Unlock()
	}
	if args[0] == "set" {
		r.setPipefail(args[1:])
	}
	switch {
	case args[0] == "source" || args[0] == ".":
		return append([]string{sourceCmd}, args[1:]...), nil
	case args[0] == "command" && len(args) > 2 && (args[1] == "-v" || args[1] == "-V"):
		return append([]string{"which"}, args[2:]...), nil
	case args[0] == "type" && len(args) > 2 && (args[1] == "-P" || args[1] == "-p"):
		return append([]string{"which"}, args[2:]...), nil
	}
	return args, nil
}

// setPipefail follows set's -o pipefail and +o pipefail (also in a group
// of flags, set -euo pipefail), for the pipelines rewritePipes runs in
// memory, whose status the exec handler gives. It is the run's, not the
// subshell's: a subshell that sets it changes the status of its parent's
// pipelines, which changes only the path the interpreter takes.
func (r *run) setPipefail(args []string) {
	for i, a := range args {
		if a == "--" {
			return
		}
		if len(a) > 1 && (a[0] == '-' || a[0] == '+') && strings.Contains(a[1:], "o") && i+1 < len(args) && args[i+1] == "pipefail" {
			r.pipefail.Store(a[0] == '-')
		}
	}
}

// sourceCmd is the name the call handler gives source and ".", so that
// the exec handler runs the file (a sourced file's variables do not reach
// the script that sources it in the sandbox).
const sourceCmd = "\x02source"

func toArgs(ss []string) []arg {
	out := make([]arg, len(ss))
	for i, s := range ss {
		out[i] = arg{vals: []string{s}}
	}
	return out
}

// execCmd is the exec handler: it records and judges a command, runs the
// scripts it starts and the pure utilities in-process, and answers every
// other command with a taint mark on its standard output.
func (r *run) execCmd(ctx context.Context, args []string) error {
	sb := r.sb
	hc := interp.HandlerCtx(ctx)
	switch args[0] {
	case pipeEnd:
		return sb.endPipe(hc.Stdout, hc.LastExitStatus)
	case pipeEnter:
		return sb.enterPipe()
	case pipeLeave:
		return sb.leavePipe(hc.LastExitStatus)
	case procSubstEnd:
		return r.endProcSubst(hc.Stdout, args[len(args)-1], r.line(hc.Pos))
	}
	if in, xStatus, yargs, ok := sb.pipeInput(args); ok {
		hc.Stdin = strings.NewReader(in)
		err := r.command(hc, yargs)
		if err == nil && xStatus != 0 && r.pipefail.Load() {
			return interp.ExitStatus(uint8(xStatus)) // the last command that failed
		}
		return err
	}
	if args[0] == hdocMarker && len(args) > 2 {
		hc.Stdin = strings.NewReader(args[1])
		return r.command(hc, args[2:])
	}
	return r.command(hc, args)
}

// command records and judges the command args, with hc's standard
// streams (execCmd).
func (r *run) command(hc interp.HandlerContext, args []string) error {
	sb := r.sb
	line := r.line(hc.Pos)
	if what := sb.tainted(args[0]); what != "" {
		sb.add(ruleUnresolved, line, "runs a command whose name comes from "+what)
		_, _ = io.WriteString(hc.Stdout, sb.mark("the output of a command karpx cannot determine"))
		return nil
	}
	if args[0] == sourceCmd {
		if len(args) < 2 {
			return nil
		}
		sb.runImageFile(absPath(hc.Dir, args[1]), line, "sourced", "sourced process substitution")
		return nil // a file of the AMI: part of the image, like its programs
	}
	sb.record(args)
	argv := unwrap(toArgs(args))
	if len(argv) == 0 {
		return nil
	}
	for _, a := range argv {
		if what := sb.tainted(a.first()); what != "" && a.first() == argv[0].first() {
			sb.add(ruleUnresolved, line, "runs a command whose name comes from "+what)
			return nil
		}
	}
	name := path.Base(argv[0].first())
	rest := make([]string, len(argv)-1)
	for i, a := range argv[1:] {
		rest[i] = a.first()
	}
	if what := restartWhat(name, argv[1:]); what != "" {
		sb.add(RuleUserDataNodeRestart, line, what+r.suffix())
	}
	if what := swapWhat(name, argv[1:]); what != "" {
		sb.add(ruleSwapOn, line, what+r.suffix())
	}
	if p := argv[0].first(); strings.Contains(p, "/") {
		if vf, ok := sb.file(absPath(hc.Dir, p)); ok {
			sb.runText(vf.content, line, "file "+p)
			return nil
		}
	}
	return r.utility(hc, name, rest, line)
}

func (r *run) suffix() string {
	if r.via == "" {
		return ""
	}
	return " (in " + r.via + ")"
}

// record notes a command line the script runs.
func (sb *sandbox) record(args []string) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if len(sb.commands) < maxInterpSteps {
		sb.commands = append(sb.commands, strings.Join(args, " "))
	}
}

// runImageFile runs the script at absolute path p, if the sandbox holds
// it (see file), as text reached from line origin, named
// "<kind> <p>" (or substitution when p is the pipe of a process
// substitution, whose path holds "sh-interp-"). A file the sandbox does not
// hold is part of the AMI, like its programs, and is not run.
func (sb *sandbox) runImageFile(p string, origin int, kind, substitution string) {
	vf, ok := sb.file(p)
	if !ok {
		return
	}
	via := kind + " " + p
	if strings.Contains(p, "sh-interp-") {
		via = substitution
	}
	sb.runText(vf.content, origin, via)
}
