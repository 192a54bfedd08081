package lint

import (
	"runtime"
	"strings"
	"testing"
	"time"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// TestSandboxBounds runs scripts that loop, fork, recurse or grow without
// end: each is refused as uninspectable (KX009) with the bound it passed,
// never a hang or a crash. Time and allocation are printed, not asserted;
// the finding names the bound, or the wall-time safety net when a loaded
// machine reaches it first.
func TestSandboxBounds(t *testing.T) {
	for _, tc := range []struct {
		name, script, why string
	}{
		{"busy loop", "while :; do :; done", "commands"},
		{"arithmetic loop", "for ((i=0;i>=0;i++)); do ((j+=1)); done", "commands"},
		{"until loop", "until false; do x=1; done", "commands"},
		{"recursion", "f(){ f; }; f", "recurse"},
		// Each side of an interpreter's pipe runs on its own goroutine,
		// so the recursion bound does not see it; the live pipes bound
		// stops it.
		{"fork bomb", "f(){ f | f & }; f", "at once"},
		{"classic fork bomb", ":(){ :|:& };:", "at once"},
		{"fork bomb in a subshell", "f(){ (f | f) & }; f", "at once"},
		{"fork bomb into read", "f(){ f | read x & }; f", "at once"},
		{"fork bomb into a loop", "f(){ f | while read l; do f; done; }; f", "at once"},
		{"fork bomb through sh", "f(){ echo f | sh & f | f; }; f", "at once"},
		{"process substitution bomb", "f(){ cat <(f) <(f); }; f", "recurse"},
		{"output process substitution bomb", "f(){ echo x > >(f); f; }; f", "recurse"},
		{"background bomb", "f(){ f & f & }; f", "recurse"},
		{"substitution bomb", "f(){ echo $(f) $(f); }; f", "recurse"},
		{"doubling in a loop", "x=aaaaaaaaaaaaaaaa; while :; do x=$x$x; done", "variables"},
		{"doubling unrolled", "x=aaaaaaaaaaaaaaaa\n" + strings.Repeat("x=$x$x\n", 60), "variables"},
		{"many expansions", "x=a\necho " + strings.Repeat("$x", 100), "expansions"},
		{"brace expansion", "echo {1..1000}{1..1000}", "brace"},
		{"replacement growth", "x=aaaa; y=${x//a/$x}", "replacement"},
		{"output loop", "while :; do echo " + strings.Repeat("a", 1000) + " >> /tmp/x; done", "bytes"},
		{"substitution output", "x=$(while :; do echo " + strings.Repeat("a", 1000) + "; done)", "outputs"},
		{"shells in a loop", "while :; do sh -c 'sh -c :'; done", "scripts"},
		{"self-running file", "echo 'sh /tmp/a' > /tmp/a; sh /tmp/a", "scripts"},
		{"endless input", "cat /dev/zero | sh", "file /dev/zero"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			start := time.Now()
			fs := CheckUserData(apisv1.AMIFamilyAL2023, "#!/bin/bash\n"+tc.script+"\n")
			took := time.Since(start)
			runtime.ReadMemStats(&m1)
			t.Logf("%v, %d KiB allocated: %v", took.Round(time.Millisecond), (m1.TotalAlloc-m0.TotalAlloc)>>10, fs)
			var found *Finding
			for i := range fs {
				if fs[i].RuleID == RuleUserDataUninspectable && fs[i].Unresolved() {
					found = &fs[i]
				}
			}
			if found == nil || found.Severity != SeverityDeny {
				t.Fatalf("got %v, want a KX009 denial", fs)
			}
			// The time bound is a safety net that a loaded machine may
			// reach before the step bound; either is a refusal.
			if !strings.Contains(found.Message, tc.why) && !strings.Contains(found.Message, "runs longer than") {
				t.Errorf("KX009 %q does not name the bound (%q)", found.Message, tc.why)
			}
		})
	}
}

// TestUnresolvedSeverity checks the --uninspectable-commands setting: warn
// turns KX009 findings about commands into warnings and leaves a part
// karpx cannot decode denied.
func TestUnresolvedSeverity(t *testing.T) {
	fs := CheckUserData(apisv1.AMIFamilyAL2023, "#!/bin/bash\n$(curl -s https://example.com/cmd)\n")
	if !fs.Denied() || !fs[0].Unresolved() {
		t.Fatalf("default: got %v, want an unresolved KX009 denial", fs)
	}
	if w := fs.WithUnresolvedSeverity(SeverityWarning); w.Denied() || len(w.Warnings()) != 1 {
		t.Errorf("warn: got %v, want one warning", w)
	}
	part := CheckUserData(apisv1.AMIFamilyAL2023, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: text/x-include-url\n\nhttps://example.com/more\n--b--\n")
	if !part.WithUnresolvedSeverity(SeverityWarning).Denied() {
		t.Errorf("warn: an #include part is no longer denied: %v", part)
	}
	for in, want := range map[string]Severity{"": SeverityDeny, "deny": SeverityDeny, "Warn": SeverityWarning, "warning": SeverityWarning} {
		if got, err := ParseUnresolvedSeverity(in); err != nil || got != want {
			t.Errorf("ParseUnresolvedSeverity(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseUnresolvedSeverity("allow"); err == nil || !strings.Contains(err.Error(), "--uninspectable-commands") {
		t.Errorf("ParseUnresolvedSeverity(allow): %v, want an error naming the flag", err)
	}
}
