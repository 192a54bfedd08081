package lint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

// This file runs a shell script in mvdan.cc/sh/v3's interpreter (interp)
// inside a sandbox, so that karpx knows the commands the node will run
// rather than the words the script spells (docs/rules.md, "The principle").
// Nothing is executed: every command that is not a shell builtin is
// recorded and judged by the same matcher as the static scan (restartWhat);
// files the script writes go to a virtual file system, and are followed
// when they are later run, sourced, installed as systemd units or cron
// tables, or written to a path the node executes at boot (bootScript); the
// pure utilities scripts use to build commands (base64, gzip -d, tr,
// simple sed, cat, tee, which, command -v, cp, mv) run in-process.
//
// Whatever comes from outside the script (the output of any other program,
// a file karpx did not see written, an environment variable the script does
// not set) is a taint mark: a command whose name, or a script whose text,
// holds a mark is uninspectable. The interpreter takes one path through the
// script; a command on another path is judged by the static scan when its
// name and script are literal, and is uninspectable when they are not
// (sandbox.unvisited).

// Bounds of one sandboxed run (the script and every script it runs).
const (
	// maxInterpSteps bounds the simple commands (builtins, functions and
	// recorded commands), assignments and loop iterations a run may
	// execute: 5,000, two orders of magnitude above the userData of the
	// corpus test (Karpenter's examples run a few dozen). Goroutines and
	// pipes have their own bound, maxLivePipes.
	maxInterpSteps = 5000
	// maxInterpTime bounds a run's wall time: 1 s, a safety net. Every
	// loop iteration, function call and assignment is a step (prepare),
	// so maxInterpSteps stops a run first (5,000 steps take about 80 ms
	// on a loaded 2-core machine); a review waiting for CPU on an
	// overloaded node must not trip this bound. Ordinary userData runs in
	// well under a millisecond.
	maxInterpTime = time.Second
	// maxInterpBytes bounds the bytes a run may hold in files, output and
	// variables: MaxDecodedBytes (1 MiB), the bound on decoded userData.
	maxInterpBytes = MaxDecodedBytes
	// maxInterpVarBytes bounds the bytes a run's variables hold at once:
	// 256 KiB. With maxInterpExpansions it bounds what one command line
	// can expand to (16 MiB) before the next step's check stops the run.
	maxInterpVarBytes = 256 << 10
	// maxInterpExpansions bounds the parameter expansions and command
	// substitutions in one word and in one simple command: 64; a
	// command line with more is refused before the run.
	maxInterpExpansions = 64
	// maxInterpBraceWords bounds the words one brace expansion makes
	// ({1..100}{1..100}): 10,000.
	maxInterpBraceWords = 10000
	// maxInterpScripts bounds the scripts one run starts (sh -c, sourced
	// and executed files, unit Exec lines, cron commands): 256.
	maxInterpScripts = 256
)

// ruleUnresolved is the internal rule of a shellEffect naming a command
// karpx cannot determine; it becomes a KX009 finding marked unresolved.
const ruleUnresolved = "unresolved"

// ruleFileSecret is the internal rule of a shellEffect carrying a secret
// finding in a file the script wrote (shellEffect.finding; what is the
// file's path).
const ruleFileSecret = "file-secret"

// taintPrefix starts a taint mark, "\x01karpx#N#\x01" where N indexes
// sandbox.sources; binary data (gzip, decoded base64) is unlikely to hold
// the whole of it by chance, and if it does the text is only refused.
const taintPrefix = "\x01karpx#"

// errInterpBound stops a run that passed one of its bounds.
var errInterpBound = errors.New("interpreter bound")

// sandbox is one run's shared state; handlers run on the interpreter's
// goroutines (pipes run both sides at once), so it is guarded by mu.
type sandbox struct {
	ctx     context.Context
	cancel  context.CancelFunc
	mu      sync.Mutex
	steps   int
	bytes   int
	scripts int
	files   map[string]vfile
	sources []string
	effects []shellEffect
	// executed holds the offsets of the top script's simple commands the
	// interpreter ran.
	executed map[uint]bool
	// commands are the command lines the run recorded (at most
	// maxInterpSteps), for TestPrinciple.
	commands []string
	halted   string
	// pipes holds the output of each rewritten pipeline's left side
	// until its right side reads it (endPipe, pipeInput).
	pipes []pipeOut
	// livePipes counts the interpreter's own pipes open now
	// (maxLivePipes); substs numbers process substitutions' files.
	livePipes int
	substs    int
}

// vfile is a file the script wrote: its content and the line of the
// top script that wrote it. A file written through the open handler keeps
// its content in live, from which sandbox.file makes content.
type vfile struct {
	content string
	line    int
	live    *vbuf
}

// run is one script run inside a sandbox; origin is the top script's
// line that started it (0 for the top script itself, whose lines come
// from the interpreter's positions).
type run struct {
	sb     *sandbox
	origin int
	base   int
	via    string
	// cur is the line of the simple command running now, for handlers
	// the interpreter calls without a position (open).
	cur atomic.Int64
	// pipefail is set -o pipefail's state (setPipefail).
	pipefail atomic.Bool
}

func (r *run) line(p syntax.Pos) int {
	switch {
	case r.origin > 0:
		return r.origin
	case !p.IsValid():
		return max(int(r.cur.Load()), r.base, 1)
	}
	return r.base + int(p.Line()) - 1
}

// mark returns a taint mark standing for what.
func (sb *sandbox) mark(what string) string {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if len(sb.sources) >= maxInterpSteps {
		return taintPrefix + "0#\x01"
	}
	sb.sources = append(sb.sources, what)
	return taintPrefix + strconv.Itoa(len(sb.sources)-1) + "#\x01"
}

// tainted returns what the first taint mark in s stands for, or "".
func (sb *sandbox) tainted(s string) string {
	i := strings.Index(s, taintPrefix)
	if i < 0 {
		return ""
	}
	rest := s[i+len(taintPrefix):]
	j := strings.IndexByte(rest, '#')
	n, err := strconv.Atoi(rest[:max(j, 0)])
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if j < 0 || err != nil || n < 0 || n >= len(sb.sources) {
		return sb.sources[0]
	}
	return sb.sources[n]
}

func (sb *sandbox) add(rule string, line int, what string) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for _, e := range sb.effects {
		if e.rule == rule && e.line == line && e.what == what {
			return
		}
	}
	if len(sb.effects) < 64 {
		sb.effects = append(sb.effects, shellEffect{rule: rule, line: line, what: what})
	}
}

// halt records the first bound passed and stops the run.
func (sb *sandbox) halt(why string) error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.halted == "" {
		sb.halted = why
	}
	if sb.cancel != nil {
		sb.cancel() // the interpreter stops every runner of the run
	}
	return errInterpBound
}

// charge counts n bytes against maxInterpBytes.
func (sb *sandbox) charge(n int) error {
	sb.mu.Lock()
	sb.bytes += n
	over := sb.bytes > maxInterpBytes
	sb.mu.Unlock()
	if over {
		return sb.halt(fmt.Sprintf("it writes more than %d bytes", maxInterpBytes))
	}
	return nil
}

// interpretShell runs the parsed top script f, whose first line is line
// base of the analysed text, in a sandbox, and returns the effects of the
// commands it ran (KX003, and ruleUnresolved for each command karpx cannot
// determine) and the offsets of the simple commands it ran.
func interpretShell(f *syntax.File, base int) ([]shellEffect, map[uint]bool) {
	sb := runSandbox(f, base)
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.effects, sb.executed
}

// runSandbox runs f and the scripts it leaves at boot paths, and returns
// the finished sandbox.
func runSandbox(f *syntax.File, base int) *sandbox { return runSandboxWith(f, base, nil) }

// runSandboxWith is runSandbox with files already on the virtual file
// system (cloud-config write_files, by path), as if written before line 1.
func runSandboxWith(f *syntax.File, base int, files map[string]string) *sandbox {
	ctx, cancel := context.WithTimeout(context.Background(), maxInterpTime)
	defer cancel()
	sb := &sandbox{ctx: ctx, cancel: cancel, files: map[string]vfile{}, executed: map[uint]bool{}, sources: []string{"text karpx cannot know", jinjaMarkSource}}
	for p, c := range files {
		sb.files[p] = vfile{content: c, line: base}
	}
	top := &run{sb: sb, base: base}
	sb.exec(top, f)
	// Files left where the node runs them at boot run after the script.
	names := make([]string, 0, len(sb.files))
	for n := range sb.files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		vf, _ := sb.file(n)
		cmds, kind := bootScript(n, vf.content)
		for _, c := range cmds {
			sb.runText(c, vf.line, kind+" "+n)
		}
	}
	sb.fileSecrets(files, f)
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.halted != "" {
		sb.effects = append(sb.effects, shellEffect{rule: ruleUnresolved, line: base,
			what: "the script cannot be followed to its end: " + sb.halted})
	}
	return sb
}

// maxSecretFiles bounds the files of one run the secret rules read: 64,
// the bound on a run's effects. Their bytes are bounded by maxInterpBytes.
const maxSecretFiles = 64

// fileSecrets runs the secret rules (scanSecrets: gitleaks' rule set and
// karpx's patterns) over every file the run wrote, in path order, and
// adds a finding for each credential, at the line of the top script
// that wrote the file: a credential a script decodes (base64 -d, gzip -d,
// tr, printf escapes) or assembles from pieces is on the node as surely
// as one spelled in userData. Files given to the run (write_files) and
// left unchanged are scanned where they are decoded (bootfiles.go);
// placeholders and public material are not reported (scanDetectorSecrets).
// A credential on a line the script f spells literally (a here-document)
// is left to the scan of userData's own text, which reports it at its
// line.
func (sb *sandbox) fileSecrets(given map[string]string, f *syntax.File) {
	sb.mu.Lock()
	names := make([]string, 0, len(sb.files))
	for n := range sb.files {
		names = append(names, n)
	}
	sb.mu.Unlock()
	sort.Strings(names)
	scanned := 0
	var src []string // the printed script, made on the first finding
	for _, n := range names {
		vf, _ := sb.file(n)
		if c, ok := given[n]; ok && c == vf.content || strings.TrimSpace(vf.content) == "" {
			continue
		}
		if scanned++; scanned > maxSecretFiles {
			return
		}
		for _, fd := range scanSecrets(segment{kind: segOpaque, text: vf.content, line: 1}) {
			if src == nil {
				var b strings.Builder
				if syntax.NewPrinter().Print(&b, f) == nil {
					src = []string{b.String()}
				} else {
					src = []string{""}
				}
			}
			if l := strings.TrimSpace(lineAt(vf.content, fd.Line-1)); l != "" && strings.Contains(src[0], l) {
				continue
			}
			sb.mu.Lock()
			if len(sb.effects) < 2*maxSecretFiles {
				sb.effects = append(sb.effects, shellEffect{rule: ruleFileSecret, line: vf.line, what: n, finding: &fd})
			}
			sb.mu.Unlock()
		}
	}
}

// lineAt is the 0-based line i of text, or "".
func lineAt(text string, i int) string {
	for j, l := range eachLine(text) {
		if j == i {
			return l
		}
	}
	return ""
}

// runText parses and runs a script the top script starts at line origin.
func (sb *sandbox) runText(src string, origin int, via string) {
	sb.mu.Lock()
	sb.scripts++
	over := sb.scripts > maxInterpScripts
	sb.mu.Unlock()
	if over {
		_ = sb.halt(fmt.Sprintf("it starts more than %d scripts", maxInterpScripts))
		return
	}
	if what := sb.tainted(src); what != "" {
		sb.add(ruleUnresolved, origin, fmt.Sprintf("runs a script (%s) built from %s", via, what))
		return
	}
	if in := shebangInterpreter(src); in != "" && !shells[in] {
		sb.add(ruleUnresolved, origin, fmt.Sprintf("runs a #!%s script (%s); karpx models only shell scripts", in, via))
		return
	}
	f, perr := parseShell(src)
	if perr != nil {
		if perr.tooDeep {
			sb.add(ruleUnresolved, origin, fmt.Sprintf("runs a script (%s) that cannot be read: %s", via, perr.msg))
		}
		return // a script that does not parse does not run
	}
	sb.exec(&run{sb: sb, origin: max(origin, 1), via: via}, f)
}

// prepare readies f for the sandbox and returns why it cannot be run
// within the bounds, or "". Background jobs run in order, so that no
// goroutine outlives the run; every statement that only assigns
// variables is followed by a ":" (x=$x$x becomes x=$x$x && :), and every
// loop body starts with one, so that the call handler's checks run after
// each assignment and in each iteration; words and command lines with
// more than maxInterpExpansions expansions, brace expansions of more
// than maxInterpBraceWords words and ${x//pattern/replacement} with an
// expansion in the replacement are refused, since each can grow a value
// past the bounds within one step. Last, the pipelines that can run
// without an operating-system pipe are rewritten (rewritePipes).
func prepare(f *syntax.File) string {
	var assigns []*syntax.Stmt
	reason := ""
	syntax.Walk(f, func(n syntax.Node) bool {
		if reason != "" {
			return false
		}
		switch n := n.(type) {
		case *syntax.Stmt:
			n.Background, n.Disown = false, false
			if c, ok := n.Cmd.(*syntax.CallExpr); ok && len(c.Args) == 0 && len(c.Assigns) > 0 {
				assigns = append(assigns, n)
			}
		case *syntax.CallExpr:
			total := 0
			for _, w := range n.Args {
				total += expansions(w)
			}
			for _, a := range n.Assigns {
				if a.Value != nil {
					total += expansions(a.Value)
				}
			}
			if total > maxInterpExpansions {
				reason = fmt.Sprintf("a command line has more than %d expansions", maxInterpExpansions)
			}
		case *syntax.Word:
			if expansions(n) > maxInterpExpansions {
				reason = fmt.Sprintf("a word has more than %d expansions", maxInterpExpansions)
			}
			w := *n
			w.Parts = slices.Clone(n.Parts)
			if syntax.SplitBraces(&w) && braceWords(&w) > maxInterpBraceWords {
				reason = fmt.Sprintf("a brace expansion makes more than %d words", maxInterpBraceWords)
			}
		case *syntax.ParamExp:
			if n.Repl != nil && n.Repl.With != nil && expansions(n.Repl.With) > 0 {
				reason = "a ${…//…/…} replacement holds an expansion"
			}
		}
		return true
	})
	colon := &syntax.Word{Parts: []syntax.WordPart{&syntax.Lit{Value: ":"}}}
	syntax.Walk(f, func(n syntax.Node) bool {
		// Each loop iteration starts with ":", so that it is a step.
		switch n := n.(type) {
		case *syntax.WhileClause:
			n.Do = append([]*syntax.Stmt{{Cmd: &syntax.CallExpr{Args: []*syntax.Word{colon}}, Position: n.Pos()}}, n.Do...)
		case *syntax.ForClause:
			n.Do = append([]*syntax.Stmt{{Cmd: &syntax.CallExpr{Args: []*syntax.Word{colon}}, Position: n.Pos()}}, n.Do...)
		}
		return true
	})
	for _, st := range assigns {
		st.Cmd = &syntax.BinaryCmd{Op: syntax.AndStmt, X: &syntax.Stmt{Cmd: st.Cmd, Position: st.Position},
			Y: &syntax.Stmt{Cmd: &syntax.CallExpr{Args: []*syntax.Word{colon}}, Position: st.Position}}
	}
	if reason == "" {
		rewritePipes(f)
	}
	return reason
}

// expansions counts the parameter expansions and command substitutions
// of w, outside nested command substitutions.
func expansions(w *syntax.Word) int {
	n := 0
	var parts func(ps []syntax.WordPart)
	parts = func(ps []syntax.WordPart) {
		for _, p := range ps {
			switch p := p.(type) {
			case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ProcSubst:
				n++
			case *syntax.DblQuoted:
				parts(p.Parts)
			}
		}
	}
	parts(w.Parts)
	return n
}

// braceWords is the number of words the brace expansions of w make,
// capped just above maxInterpBraceWords.
func braceWords(w *syntax.Word) int {
	n := 1
	for _, p := range w.Parts {
		b, ok := p.(*syntax.BraceExp)
		if !ok {
			continue
		}
		k := 0
		if b.Sequence && len(b.Elems) >= 2 {
			lo, err1 := strconv.Atoi(b.Elems[0].Lit())
			hi, err2 := strconv.Atoi(b.Elems[1].Lit())
			if err1 != nil || err2 != nil {
				k = 26 // {a..z}: letters
			} else {
				k = max(hi-lo, lo-hi) + 1
			}
		} else {
			for _, e := range b.Elems {
				k += braceWords(e)
			}
		}
		n *= max(k, 1)
		if n > maxInterpBraceWords {
			return maxInterpBraceWords + 1
		}
	}
	return n
}
