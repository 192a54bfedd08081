package lint

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// This file lets the sandbox (shell_interp.go) run most pipelines without
// an operating-system pipe. mvdan.cc/sh/v3/interp v3.14.1 wires every
// "x | y" with os.Pipe and a goroutine for x (interp/runner.go, the
// syntax.Pipe case), and every redirected or here-document standard input
// through another os.Pipe (interp/stdin_os.go, newStdinFile): its standard
// input must be an *os.File, so that real subprocesses can inherit it. The
// sandbox starts no subprocess, yet the pipe's system calls (pipe2, the
// poller's registration, two closes) were about half of the sandbox's CPU
// time on a script of 200 pipelines (BenchmarkCheckUserData).
//
// rewritePipes turns "x | y", where y is a simple command that the
// interpreter hands to the exec handler, into one simple command:
//
//	pipeMarker "$((x) && pipeEnd || pipeEnd)" y args…
//
// The command substitution runs x in a subshell with its standard output
// captured in memory, as the pipe's left side runs in a subshell (the
// list keeps set -e from stopping the substitution when x fails, as a
// pipe's left side does not stop the shell, and gives pipeEnd x's
// status, for pipefail); pipeEnd
// keeps that text exactly (endPipe), and the exec handler (execCmd) strips
// the marker and gives y the text as its standard input. The two sides run one after the other instead of at once: in the
// sandbox nothing blocks on a full pipe, and the steps and bytes bounds
// stop an endless x (yes | head) as they stop any loop.

// pipesInMemory turns the in-memory pipelines of rewritePipes on;
// TestPropertyPipesInMemory turns it off to compare the sandbox's effects
// with the interpreter's own pipes.
var pipesInMemory = true

// pipeMarker and pipeEnd are command names no script can spell as a
// function (a function name is one unquoted word; these hold a space) and
// that are neither builtins nor on any PATH.
const (
	pipeMarker  = "\x02karpx pipe"
	pipeEnd     = "\x02karpx pipe end"
	pipeEndByte = "\x03"
	// hdocMarker starts a command whose here-document rewriteHeredocs
	// made its first argument.
	hdocMarker = "\x02karpx here-document"
	// pipeEnter and pipeLeave count the interpreter's own pipes.
	pipeEnter = "\x02karpx pipe enter"
	pipeLeave = "\x02karpx pipe leave"
	// procSubstEnd ends a process substitution (endProcSubst).
	procSubstEnd = "\x02karpx process substitution"
	// procSubstInput is the file a >(…) substitution reads: what the
	// script writes to it, which the sandbox does not follow.
	procSubstInput = "/dev/fd/karpx-process-substitution-input"
)

// maxLivePipes bounds the interpreter's own pipes (those rewritePipes
// leaves, each a goroutine and two file descriptors) open at once in one
// run: 64. A chain of k commands holds k-1; a function that pipes into
// itself (f(){ f | f & }) holds one more per call, so that without this
// bound it held up to maxInterpSteps goroutines, each with its own stack
// of the interpreter's recursion (123 MB of RSS in the webhook).
const maxLivePipes = 64

// pipeRisky are words whose presence anywhere in a script makes the set of
// its functions, aliases and builtin dispatch depend on the run (eval and
// trap run text in the current shell, alias and shopt's expand_aliases
// rename commands, shopt -so pipefail is not followed); in such
// a script no pipeline is rewritten, since the right side of a pipe that
// turns out to be a function or builtin must read the real pipe.
var pipeRisky = []string{"eval", "trap", "alias", "shopt"}

// builtinRunners are the builtins that run a builtin or program named by
// their arguments; one with an argument that is not literal could be
// "command eval".
var builtinRunners = setOf("command", "builtin", "exec")

// rewritePipes rewrites the pipelines of f as described above, where it
// is sound: y is a simple command without redirections or negation whose
// name is one plain unquoted literal that is neither a builtin
// (interp.IsBuiltin) nor a function declared anywhere in f, and f has no
// command whose name is not literal, no pipeRisky word and no
// builtinRunners command with an argument that is not literal. Then the
// functions y could name at run time are those f declares: a function is
// defined only by a declaration the interpreter runs, in f or in text run
// by eval, trap or an alias (refused above); sourced files and nested
// shells run in a runner of their own (sandbox.runText). Every other
// pipeline keeps the interpreter's pipe.
func rewritePipes(f *syntax.File) {
	funcs := map[string]bool{}
	sound := true
	syntax.Walk(f, func(n syntax.Node) bool {
		if !sound {
			return false
		}
		switch n := n.(type) {
		case *syntax.FuncDecl:
			funcs[n.Name.Value] = true
		case *syntax.CallExpr:
			if len(n.Args) > 0 && n.Args[0].Lit() == "" {
				sound = false // a command name known only at run time
			}
			if len(n.Args) > 0 && builtinRunners[n.Args[0].Lit()] {
				for _, a := range n.Args {
					sound = sound && a.Lit() != ""
				}
			}
		case *syntax.Lit:
			sound = !containsAny(n.Value, pipeRisky...)
		case *syntax.SglQuoted:
			sound = !containsAny(n.Value, pipeRisky...)
		}
		return true
	})
	rewriteProcSubsts(f)
	var visit func(n syntax.Node) bool
	visit = func(n syntax.Node) bool {
		st, ok := n.(*syntax.Stmt)
		if !ok {
			return true
		}
		b, ok := st.Cmd.(*syntax.BinaryCmd)
		if !ok || (b.Op != syntax.Pipe && b.Op != syntax.PipeAll) {
			return true
		}
		y, ok := plainCall(b.Y, funcs)
		if !ok || !sound || b.Op != syntax.Pipe || !pipesInMemory {
			countPipe(st, b)
			syntax.Walk(b.X, visit)
			syntax.Walk(b.Y, visit)
			return false // st now holds b: walking on would wrap it again
		}
		pos := y.Args[0].Pos()
		// ( x ) && pipeEnd || pipeEnd: exit and set -e leave x's
		// subshell and nothing more, so that pipeEnd runs after whatever
		// x does, with x's status.
		x := &syntax.Stmt{Position: b.X.Position, Cmd: &syntax.Subshell{Lparen: pos, Rparen: pos, Stmts: []*syntax.Stmt{b.X}}}
		end := func() *syntax.Stmt {
			return &syntax.Stmt{Position: pos, Cmd: &syntax.CallExpr{Args: []*syntax.Word{litWord(pipeEnd, syntax.Pos{})}}}
		}
		list := &syntax.Stmt{Position: pos, Cmd: &syntax.BinaryCmd{OpPos: pos, Op: syntax.OrStmt,
			X: &syntax.Stmt{Position: pos, Cmd: &syntax.BinaryCmd{OpPos: pos, Op: syntax.AndStmt, X: x, Y: end()}},
			Y: end()}}
		subst := &syntax.Word{Parts: []syntax.WordPart{&syntax.DblQuoted{Left: pos, Right: pos,
			Parts: []syntax.WordPart{&syntax.CmdSubst{Left: pos, Right: pos, Stmts: []*syntax.Stmt{list}}}}}}
		args := append([]*syntax.Word{litWord(pipeMarker, pos), subst}, y.Args...)
		// Walk goes on into the new command, so pipelines in x are
		// rewritten too.
		st.Cmd = &syntax.CallExpr{Assigns: y.Assigns, Args: args}
		return true
	}
	syntax.Walk(f, visit)
	if sound && pipesInMemory {
		rewriteHeredocs(f, funcs)
	}
}

// plainCall returns st's simple command if the interpreter hands it to
// the exec handler whatever the run (see rewritePipes).
// rewriteHeredocs gives a simple command's here-document with a quoted
// delimiter (<<'EOF', whose body is literal) as an argument instead of
// the interpreter's os.Pipe and writing goroutine (interp's hdocReader):
//
//	hdocMarker 'body' cmd args… (other redirections kept)
//
// and the exec handler gives cmd the body as its standard input. It is
// done where rewritePipes' in-memory pipelines are, for the same commands
// (plainCall, redirections aside), when the here-document is the
// command's only input redirection.
func rewriteHeredocs(f *syntax.File, funcs map[string]bool) {
	syntax.Walk(f, func(n syntax.Node) bool {
		st, ok := n.(*syntax.Stmt)
		if !ok || len(st.Redirs) == 0 || st.Negated {
			return true
		}
		c, ok := st.Cmd.(*syntax.CallExpr)
		if !ok || len(c.Args) == 0 {
			return true
		}
		if _, ok := plainCall(&syntax.Stmt{Cmd: c}, funcs); !ok || strings.HasPrefix(c.Args[0].Lit(), "\x02") {
			return true
		}
		doc, inputs := -1, 0
		for i, rd := range st.Redirs {
			switch rd.Op {
			case syntax.Hdoc:
				doc = i
				inputs++
			case syntax.RdrIn, syntax.DplIn, syntax.WordHdoc, syntax.DashHdoc, syntax.RdrInOut:
				inputs++
			}
		}
		if doc < 0 || inputs != 1 || !quotedDelimiter(st.Redirs[doc].Word) {
			return true
		}
		body := ""
		if h := st.Redirs[doc].Hdoc; h != nil {
			if body = h.Lit(); body == "" && len(h.Parts) > 0 {
				return true
			}
		}
		pos := c.Args[0].Pos()
		text := &syntax.Word{Parts: []syntax.WordPart{&syntax.SglQuoted{Left: pos, Right: pos, Value: body}}}
		c.Args = append([]*syntax.Word{litWord(hdocMarker, pos), text}, c.Args...)
		st.Redirs = slices.Delete(slices.Clone(st.Redirs), doc, doc+1)
		return true
	})
}

// quotedDelimiter reports whether a here-document's delimiter is quoted
// ('EOF', "EOF", \EOF), which makes its body literal (bash(1), "Here
// Documents").
func quotedDelimiter(w *syntax.Word) bool {
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
			return true
		case *syntax.Lit:
			if strings.Contains(p.Value, "\\") {
				return true
			}
		}
	}
	return false
}

// countPipe makes st, a pipeline b that keeps the interpreter's pipe,
//
//	{ pipeEnter; b && pipeLeave || pipeLeave; }
//
// pipeEnter counts a live pipe against maxLivePipes in the goroutine that
// is about to make the pipe, before the interpreter starts the left side's
// goroutine, so that a function piping into itself is stopped at the
// bound's depth; pipeLeave counts it out and returns the pipeline's status
// (so that set -e and the status are as without the wrapper: the last
// command of an && || list is the one set -e looks at).
func countPipe(st *syntax.Stmt, b *syntax.BinaryCmd) {
	pos := b.Pos()
	call := func(name string) *syntax.Stmt {
		return &syntax.Stmt{Position: pos, Cmd: &syntax.CallExpr{Args: []*syntax.Word{litWord(name, syntax.Pos{})}}}
	}
	inner := &syntax.Stmt{Position: pos, Cmd: b}
	list := &syntax.BinaryCmd{OpPos: pos, Op: syntax.OrStmt,
		X: &syntax.Stmt{Position: pos, Cmd: &syntax.BinaryCmd{OpPos: pos, Op: syntax.AndStmt, X: inner, Y: call(pipeLeave)}},
		Y: call(pipeLeave)}
	st.Cmd = &syntax.Block{Lbrace: pos, Rbrace: pos, Stmts: []*syntax.Stmt{call(pipeEnter), {Position: pos, Cmd: list}}}
}

// rewriteProcSubsts replaces each process substitution of f, <(x) or
// >(x), for which the interpreter makes a named pipe in the real
// temporary directory and a goroutine that blocks until the pipe is
// opened (forever when the script never opens it), with
//
//	$(! (x); procSubstEnd <)       or       $(! (x) < procSubstInput; procSubstEnd >)
//
// endProcSubst keeps what x wrote as a virtual file and puts its path in
// place of the output: the command reads <(x)'s text from the file,
// after x has run, as it would from the pipe. >(x) reads what the script
// writes to it, which the sandbox does not follow, so x reads a taint
// mark: a command or script it builds from that is refused.
func rewriteProcSubsts(f *syntax.File) {
	syntax.Walk(f, func(n syntax.Node) bool {
		var parts []syntax.WordPart
		switch n := n.(type) {
		case *syntax.Word:
			parts = n.Parts
		case *syntax.DblQuoted:
			parts = n.Parts
		default:
			return true
		}
		for i, p := range parts {
			ps, ok := p.(*syntax.ProcSubst)
			if !ok || (ps.Op != syntax.CmdIn && ps.Op != syntax.CmdOut) {
				continue
			}
			pos := ps.OpPos
			x := &syntax.Stmt{Negated: true, Position: pos, Cmd: &syntax.Subshell{Lparen: pos, Rparen: pos, Stmts: ps.Stmts}}
			dir := "<"
			if ps.Op == syntax.CmdOut {
				dir = ">"
				x.Redirs = []*syntax.Redirect{{OpPos: pos, Op: syntax.RdrIn, Word: litWord(procSubstInput, pos)}}
			}
			end := &syntax.Stmt{Position: pos, Cmd: &syntax.CallExpr{Args: []*syntax.Word{litWord(procSubstEnd, syntax.Pos{}), litWord(dir, syntax.Pos{})}}}
			parts[i] = &syntax.CmdSubst{Left: pos, Right: ps.Rparen, Stmts: []*syntax.Stmt{x, end}}
		}
		return true
	})
}

// enterPipe counts a live pipe of the interpreter (countPipe).
func (sb *sandbox) enterPipe() error {
	sb.mu.Lock()
	sb.livePipes++
	over := sb.livePipes > maxLivePipes
	sb.mu.Unlock()
	if over {
		return sb.halt(fmt.Sprintf("it has more than %d pipelines running at once (a function that pipes into itself)", maxLivePipes))
	}
	return nil
}

// leavePipe counts a live pipe out and returns the pipeline's status.
func (sb *sandbox) leavePipe(last int) error {
	sb.mu.Lock()
	sb.livePipes--
	sb.mu.Unlock()
	if last != 0 {
		return interp.ExitStatus(uint8(last))
	}
	return nil
}

// endProcSubst is procSubstEnd's exec handler: out is the command
// substitution's buffer holding what x wrote; it is kept as a virtual
// file (for <(x)) and replaced by the file's path.
func (r *run) endProcSubst(out io.Writer, dir string, line int) error {
	b, ok := out.(interface {
		String() string
		Reset()
	})
	if !ok {
		return nil
	}
	text := b.String()
	b.Reset()
	sb := r.sb
	sb.mu.Lock()
	sb.substs++
	p := fmt.Sprintf("/dev/fd/sh-interp-%d", sb.substs)
	sb.mu.Unlock()
	if dir == "<" {
		if err := sb.writeFile(p, text, line); err != nil {
			return err
		}
	}
	_, err := io.WriteString(out, p)
	return err
}

func plainCall(st *syntax.Stmt, funcs map[string]bool) (*syntax.CallExpr, bool) {
	c, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(c.Args) == 0 || st.Negated || len(st.Redirs) > 0 || len(c.Args[0].Parts) != 1 {
		return nil, false
	}
	lit, ok := c.Args[0].Parts[0].(*syntax.Lit)
	if !ok || lit.Value == "" || strings.ContainsAny(lit.Value, "\\*?[{~=") {
		return nil, false
	}
	if interp.IsBuiltin(lit.Value) || funcs[lit.Value] {
		return nil, false
	}
	return c, true
}

func litWord(s string, pos syntax.Pos) *syntax.Word {
	return &syntax.Word{Parts: []syntax.WordPart{&syntax.Lit{ValuePos: pos, ValueEnd: pos, Value: s}}}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// pipeOut is what a rewritten pipeline's left side wrote, and its status.
type pipeOut struct {
	text   string
	status int
}

// endPipe is pipeEnd's exec handler: out is the command substitution's
// buffer holding what x wrote, and status x's exit status. The interpreter
// drops NUL bytes and trailing newlines from a command substitution
// (expand.Config.cmdSubst), so the exact text is kept in the sandbox, and
// the token written in its place (pipeEndByte, its index, pipeEndByte)
// tells pipeInput where it is.
func (sb *sandbox) endPipe(out io.Writer, status int) error {
	b, ok := out.(interface{ String() string })
	if !ok {
		return nil
	}
	sb.mu.Lock()
	sb.pipes = append(sb.pipes, pipeOut{text: b.String(), status: status})
	n := len(sb.pipes) - 1
	sb.mu.Unlock()
	_, err := io.WriteString(out, pipeEndByte+strconv.Itoa(n)+pipeEndByte)
	return err
}

// pipeInput splits a rewritten pipeline's arguments (pipeMarker, x's
// output, y's arguments) into y's standard input, x's status and y's
// arguments; ok is false for any other command. When x's output does not
// end with endPipe's token, x left the substitution early (return, break)
// and the text may have lost NUL bytes and trailing newlines: it is given
// to y with a taint mark after it, so that a script or file built from it
// is refused rather than read wrong.
func (sb *sandbox) pipeInput(args []string) (stdin string, xStatus int, yargs []string, ok bool) {
	if len(args) < 3 || args[0] != pipeMarker {
		return "", 0, args, false
	}
	out := args[1]
	if strings.HasSuffix(out, pipeEndByte) {
		if i := strings.LastIndex(out[:len(out)-1], pipeEndByte); i >= 0 {
			if n, err := strconv.Atoi(out[i+1 : len(out)-1]); err == nil {
				sb.mu.Lock()
				defer sb.mu.Unlock()
				if n >= 0 && n < len(sb.pipes) {
					p := sb.pipes[n]
					sb.pipes[n] = pipeOut{}
					return p.text, p.status, args[2:], true
				}
			}
		}
	}
	if out == "" {
		return "", 0, args[2:], true
	}
	return out + sb.mark("the output of a pipeline's left side that left early"), 0, args[2:], true
}
