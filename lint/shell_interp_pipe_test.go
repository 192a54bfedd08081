package lint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	apisv1 "github.com/karpx/karpx/apis/v1"

	"mvdan.cc/sh/v3/syntax"
)

// pipeLines are pipelines whose data matters to the sandbox: scripts and
// binary (gzip, with NUL bytes) text piped into shells and utilities,
// trailing newlines, nested and chained pipes, a left side that exits,
// fails under set -e, redirects its output or loops, and right sides that
// are functions or builtins (which keep the interpreter's pipe).
var pipeLines = []string{
	"echo " + enc64([]byte("reboot\n")) + " | base64 -d | sh",
	"echo " + enc64(gzipBytes("systemctl stop kubelet\n")) + " | base64 -d | gunzip | bash",
	"printf 'echo one\\n\\n\\n' | tee /tmp/nl.sh > /dev/null\nsh /tmp/nl.sh",
	"{ echo 'shutdown -r now'; exit 0; } | sh",
	"set -e\nfalse | cat\necho after | tee -a /var/log/after",
	"{ exec > /tmp/out; echo reboot; } | sh\nsh /tmp/out",
	"for i in 1 2 3; do echo \"step$i\"; done | xargs -n1 echo | sh",
	"echo 'pkill kubelet' | tr -d '\\r' | sed 's/^/ /' | tee /opt/x.sh | cat > /opt/y.sh\nbash /opt/y.sh",
	"run() { sh; }\necho poweroff | run",
	"echo 'halt -f' | while read -r c; do $c; done",
	"echo reboot | read -r v; echo \"$v\" | sh",
	"echo $(echo 'systemctl restart containerd' | cat) | sh",
	"curl -s http://example.com/x | sh",
	"echo '0 3 * * * reboot' | crontab -",
	"echo 'reboot' | at now",
	"yes | head -n 1 | sh",
	"f() { echo 'reboot' | cat; }\nf | sh",
	"echo 'echo nested | sh' | sh",
	"set -o pipefail\nif false | cat; then echo reboot > /tmp/r; else echo poweroff > /tmp/r; fi\nsh /tmp/r",
	"set -euo pipefail\n( exit 3 ) | cat || echo 'halt -f' | sh",
	"set -eo pipefail\nset +o pipefail\nfalse | cat && echo reboot | sh",
	"cat <<'EOF' | sh\nreboot\nEOF",
	"cat > /tmp/s.sh <<'EOF'\nsystemctl stop kubelet\n\nEOF\nsh /tmp/s.sh",
	"sh <<\\EOF 2>/dev/null\npoweroff\nEOF",
	"c=reboot\nsh <<EOF\n$c\nEOF",
	"sh <<-'EOF'\n\thalt -f\n\tEOF",
	"base64 -d <<'EOF' | gunzip | bash\n" + enc64(gzipBytes("pkill kubelet\n")) + "\nEOF",
}

var (
	taintIndex = regexp.MustCompile(taintPrefix + `[0-9]+#\x01`)
	// procSubstPath is the interpreter's named pipe for <(…), a random name.
	procSubstPath = regexp.MustCompile(`sh-interp-[0-9a-f]+`)
)

func normalizeRun(s string) string {
	return procSubstPath.ReplaceAllString(taintIndex.ReplaceAllString(s, "<mark>"), "sh-interp-N")
}

// sandboxOutcome is what a sandboxed run found, in an order-free form: the
// effects and the recorded commands, sorted, with taint marks' indices
// and process substitutions' pipe names (which depend on the order the two
// sides of a real pipe ran, or are random) made the same.
func sandboxOutcome(script string, inMemory bool) (effects, commands []string) {
	defer func(old bool) { pipesInMemory = old }(pipesInMemory)
	pipesInMemory = inMemory
	f, perr := parseShell(script)
	if perr != nil {
		return []string{"parse: " + perr.msg}, nil
	}
	sb := runSandbox(f, 1)
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for _, e := range sb.effects {
		// Not the line: a file's line is that of the command before its
		// redirection (the interpreter gives the open handler no
		// position), which two sides of a real pipe running at once
		// make a race.
		effects = append(effects, e.rule+": "+normalizeRun(e.what))
	}
	for _, c := range sb.commands {
		commands = append(commands, normalizeRun(c))
	}
	slices.Sort(effects)
	slices.Sort(commands)
	return effects, commands
}

// TestPropertyPipesInMemory checks that running pipelines in memory
// (rewritePipes) changes nothing the sandbox finds: for random safe
// scripts with pipeLines and spliced forbidden commands in them, the
// effects (KX003 and unresolved commands) and the recorded commands are
// the same as with the interpreter's own pipes. Seeded, so the cases are
// the same on every run.
func TestPropertyPipesInMemory(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 1))
	check := func(name, script string) {
		t.Helper()
		e1, c1 := sandboxOutcome(script, true)
		e0, c0 := sandboxOutcome(script, false)
		if !slices.Equal(e1, e0) {
			t.Errorf("%s: effects differ\nin memory: %q\nos pipes:  %q\n%s", name, e1, e0, script)
		}
		if !slices.Equal(c1, c0) {
			t.Errorf("%s: commands differ\nin memory: %q\nos pipes:  %q\n%s", name, c1, c0, script)
		}
	}
	for i, l := range pipeLines {
		check(fmt.Sprintf("pipe line %d", i), "#!/bin/bash\n"+l+"\n")
	}
	for i := range 150 {
		lines := randomSafeScript(r)
		for range 1 + r.IntN(3) {
			at := r.IntN(len(lines) + 1)
			lines = slices.Insert(lines, at, pipeLines[r.IntN(len(pipeLines))])
		}
		sp := splices[r.IntN(len(splices))]
		at := r.IntN(len(lines) + 1)
		lines = slices.Insert(lines, at, sp.lines(r, forbidden[r.IntN(len(forbidden))]))
		check(fmt.Sprintf("random #%d (%s)", i, sp.name), "#!/bin/bash\n"+strings.Join(lines, "\n")+"\n")
	}
}

// TestPipesRewritten checks which pipelines and here-documents
// rewritePipes runs in memory: those into a program, and none in a script
// whose functions or builtin dispatch can change at run time.
func TestPipesRewritten(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"echo a | tee /tmp/a", 1},
		{"echo a | base64 -d | gunzip | sh", 3},
		{"echo a | f\nf() { cat; }", 0},
		{"echo a | read x", 0},
		{"echo a | while read x; do :; done", 0},
		{"echo a | sh > /tmp/x", 0},
		{"echo a | tee /tmp/a\neval 'x=1'", 0},
		{"echo a | tee /tmp/a\n$cmd", 0},
		{"echo a | tee /tmp/a\ncommand $x", 0},
		{"set -o pipefail\necho a | tee /tmp/a", 1},
		{"echo a | 're'boot", 0},
		{"cat <<'EOF' | sh\nreboot\nEOF", 2},
		{"cat <<EOF | sh\n$x\nEOF", 1},
		{"cat < /tmp/a <<'EOF'\nx\nEOF", 0},
	} {
		f, perr := parseShell(tc.script)
		if perr != nil {
			t.Fatalf("%q: %s", tc.script, perr.msg)
		}
		rewritePipes(f)
		n := 0
		syntax.Walk(f, func(node syntax.Node) bool {
			if c, ok := node.(*syntax.CallExpr); ok && len(c.Args) > 0 && (c.Args[0].Lit() == pipeMarker || c.Args[0].Lit() == hdocMarker) {
				n++
			}
			return true
		})
		if n != tc.want {
			t.Errorf("%q: %d pipelines rewritten, want %d", tc.script, n, tc.want)
		}
	}
}

// TestSandboxLeavesNothingRunning runs scripts with process substitutions
// (the interpreter's own made a named pipe in the real temporary
// directory and a goroutine that waited for it forever when the script
// never opened it), pipes into functions and loops, here-documents and a
// fork bomb, and checks that no goroutine outlives the run and no named
// pipe is left in the temporary directory. The AWS documentation's
// logging idiom is admitted without a finding.
func TestSandboxLeavesNothingRunning(t *testing.T) {
	fifos := func() int {
		m, _ := filepath.Glob(filepath.Join(os.TempDir(), "sh-interp-*"))
		return len(m)
	}
	idiom := "exec > >(tee /var/log/user-data.log | logger -t user-data -s 2>/dev/console) 2>&1\n"
	if fs := CheckUserData(apisv1.AMIFamilyAL2023, "#!/bin/bash\n"+idiom+"echo started\n"); len(fs) != 0 {
		t.Errorf("the logging idiom: %v, want no finding", fs)
	}
	for _, s := range []string{
		idiom,
		"echo <(reboot)",
		"diff <(echo a) <(echo b) > /tmp/d",
		"echo reboot > >(sh)",
		"f() { cat; }\necho a | f | while read -r l; do echo \"$l\"; done",
		"cat <<EOF | sh\necho hi\nEOF",
		"f(){ f | f & }; f",
	} {
		g0, f0 := runtime.NumGoroutine(), fifos()
		CheckUserData(apisv1.AMIFamilyAL2023, "#!/bin/bash\n"+s+"\n")
		g := runtime.NumGoroutine()
		for i := 0; i < 1000 && g > g0; i++ { // goroutines that are ending
			time.Sleep(time.Millisecond)
			g = runtime.NumGoroutine()
		}
		if g > g0 {
			t.Errorf("%q: %d goroutines before, %d after", s, g0, g)
		}
		if f := fifos(); f > f0 {
			t.Errorf("%q: %d named pipes left in %s", s, f-f0, os.TempDir())
		}
	}
}
