package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// events is a `go test -json` run of two packages: a passes with a
// subtest and a skip, b has a failing test and one still running when the
// package times out.
const events = `{"Action":"start","Package":"example.com/a"}
{"Action":"run","Package":"example.com/a","Test":"TestFast"}
{"Action":"output","Package":"example.com/a","Test":"TestFast","Output":"=== RUN   TestFast\n"}
{"Action":"run","Package":"example.com/a","Test":"TestFast/sub"}
{"Action":"output","Package":"example.com/a","Test":"TestFast/sub","Output":"fast sub log\n"}
{"Action":"pass","Package":"example.com/a","Test":"TestFast/sub","Elapsed":0.5}
{"Action":"pass","Package":"example.com/a","Test":"TestFast","Elapsed":1.5}
{"Action":"run","Package":"example.com/a","Test":"TestSkipped"}
{"Action":"output","Package":"example.com/a","Test":"TestSkipped","Output":"=== RUN   TestSkipped\n"}
{"Action":"output","Package":"example.com/a","Test":"TestSkipped","Output":"    a_test.go:9: needs bin/kwok: run make tools\n"}
{"Action":"output","Package":"example.com/a","Test":"TestSkipped","Output":"--- SKIP: TestSkipped (0.00s)\n"}
{"Action":"skip","Package":"example.com/a","Test":"TestSkipped","Elapsed":0}
{"Action":"output","Package":"example.com/a","Output":"PASS\n"}
{"Action":"output","Package":"example.com/a","Output":"ok  \texample.com/a\t2.0s\n"}
{"Action":"pass","Package":"example.com/a","Elapsed":2.0}
not json: a go command error
{"Action":"run","Package":"example.com/b","Test":"TestBroken"}
{"Action":"output","Package":"example.com/b","Test":"TestBroken","Output":"broken: want 1, got 2\n"}
{"Action":"fail","Package":"example.com/b","Test":"TestBroken","Elapsed":30}
{"Action":"run","Package":"example.com/b","Test":"TestHangs"}
{"Action":"output","Package":"example.com/b","Test":"TestHangs","Output":"hangs log line\n"}
{"Action":"output","Package":"example.com/b","Output":"FAIL\texample.com/b\t40.0s\n"}
{"Action":"fail","Package":"example.com/b","Elapsed":40}
`

func TestSummary(t *testing.T) {
	s := newSummary()
	var out bytes.Buffer
	if err := s.read(strings.NewReader(events), &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"ok  \texample.com/a\t2.0s\n", "not json: a go command error\n", "broken: want 1, got 2\n", "hangs log line\n", "FAIL\texample.com/b\t40.0s\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, hidden := range []string{"fast sub log", "=== RUN   TestFast", "PASS\n"} {
		if strings.Contains(got, hidden) {
			t.Errorf("output of a passing test or package shown (%q):\n%s", hidden, got)
		}
	}
	if line := s.closingLine(); line != "tests: 1 passed, 1 failed, 1 skipped" {
		t.Errorf("closing line %q", line)
	}
	if !s.failed() {
		t.Error("a run with a failing package reported as passing")
	}
	var report bytes.Buffer
	s.write(&report, 0)
	r := report.String()
	if b, a := strings.Index(r, "example.com/b\n"), strings.Index(r, "example.com/a\n"); b < 0 || a < 0 || b > a {
		t.Errorf("packages not slowest first:\n%s", r)
	}
	if br, fa := strings.Index(r, "TestBroken"), strings.Index(r, "TestFast"); br < 0 || fa < 0 || br > fa {
		t.Errorf("tests not slowest first:\n%s", r)
	}
	if strings.Contains(r, "TestFast/sub") {
		t.Errorf("subtest listed among top-level tests:\n%s", r)
	}
	if !strings.Contains(r, "--- skipped top-level tests (1) ---\nTestSkipped example.com/a: a_test.go:9: needs bin/kwok: run make tools\n") {
		t.Errorf("skipped test or its reason not listed:\n%s", r)
	}
	if strings.Contains(got, "needs bin/kwok") {
		t.Errorf("a skipped test's log shown in the plain output:\n%s", got)
	}
}

// TestSummaryPassingRun is TestSummary's control: a run with only passing
// packages is not failed, and an empty input (go test never ran) is.
func TestSummaryPassingRun(t *testing.T) {
	s := newSummary()
	pass := strings.Join(strings.Split(events, "\n")[:15], "\n")
	if err := s.read(strings.NewReader(pass), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if s.failed() {
		t.Errorf("passing run reported failed: %s", s.closingLine())
	}
	if empty := newSummary(); !empty.failed() {
		t.Error("a run without any event reported as passing")
	}
}

// TestRecapPutsTheReasonBeforeFail: a failing test whose error is followed
// by 40 lines of logs (its processes' shutdown) gets its test-code lines
// repeated right before "--- FAIL", so the last 16 lines hold the reason;
// log lines from non-test files are not repeated, and a passing test's
// output is not shown at all.
func TestRecapPutsTheReasonBeforeFail(t *testing.T) {
	var b strings.Builder
	ev := func(action, test, output string) {
		fmt.Fprintf(&b, `{"Action":%q,"Package":"example.com/e2e","Test":%q,"Output":%q}`+"\n", action, test, output)
	}
	ev("run", "TestDashboard", "")
	ev("output", "TestDashboard", "=== RUN   TestDashboard\n")
	ev("output", "TestDashboard", "    dashboard_test.go:120: provisioned 2 nodes\n")
	ev("output", "TestDashboard", "    dashboard_test.go:201: webhook: decisions = 0, want ≥ 1\n")
	for i := range 40 {
		ev("output", "TestDashboard", fmt.Sprintf("    controller.go:326: shutdown line %d\n", i))
	}
	ev("output", "TestDashboard", "    shared_test.go:210: shared control plane reset in 6.7s\n")
	ev("output", "TestDashboard", "--- FAIL: TestDashboard (21.31s)\n")
	fmt.Fprintln(&b, `{"Action":"fail","Package":"example.com/e2e","Test":"TestDashboard","Elapsed":21.31}`)
	s := newSummary()
	var out bytes.Buffer
	if err := s.read(strings.NewReader(b.String()), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if last := lines[len(lines)-1]; last != "--- FAIL: TestDashboard (21.31s)" {
		t.Fatalf("last line %q, want the FAIL line", last)
	}
	excerpt := strings.Join(lines[max(0, len(lines)-16):], "\n")
	if !strings.Contains(excerpt, "dashboard_test.go:201: webhook: decisions = 0, want ≥ 1") {
		t.Errorf("the reason is not among the 16 lines before --- FAIL:\n%s", excerpt)
	}
	if strings.Count(out.String(), "shutdown line 39") != 1 {
		t.Errorf("a non-test log line repeated in the recap:\n%s", out.String())
	}
	if strings.Count(out.String(), "dashboard_test.go:201") != 2 {
		t.Errorf("the error line should appear twice (in place and in the recap):\n%s", out.String())
	}

	// Control: the output as the test wrote it does not have the reason
	// among those 16 lines; the recap is what puts it there.
	var raw []string
	for _, l := range strings.Split(b.String(), "\n") {
		var e event
		if json.Unmarshal([]byte(l), &e) == nil && e.Action == "output" {
			raw = append(raw, strings.TrimSuffix(e.Output, "\n"))
		}
	}
	if strings.Contains(strings.Join(raw[len(raw)-16:], "\n"), "dashboard_test.go:201") {
		t.Errorf("control: the reason is already among the last 16 raw lines; the test does not show the recap matters")
	}
	// A failing test without test-code lines is printed as it is.
	if got := withRecap("TestX", []string{"boom\n", "--- FAIL: TestX (1.00s)\n"}); len(got) != 2 {
		t.Errorf("withRecap without test-code lines = %q, want the two lines unchanged", got)
	}
}
