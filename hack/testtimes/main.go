// Command testtimes reads `go test -json` events (cmd/test2json's format)
// on standard input, prints what plain `go test` would (each package's
// ok/FAIL line, build errors, and the full output of failing tests only,
// each closed by a recap of its last lines from test code: withRecap),
// and writes a timing report: every package's wall time, every top-level
// test's wall time (slowest first), and one closing line
// "tests: N passed, N failed, N skipped".
//
//	go test -json -count=1 ./... | go run ./hack/testtimes -report _output/test-times.txt
//
// `make test` and `make unit` pipe through it; `.ci/run` prints the
// report after its own step table, so where the time went is in the CI log.
// It exits 1 when any test or package failed (go test's own exit status
// is kept by the Makefile's pipefail too), 0 otherwise.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

func main() {
	report := flag.String("report", "", "File the timing report is written to (default: standard output, after the test output).")
	tests := flag.Int("tests", 40, "How many of the slowest top-level tests the report lists (0: all).")
	flag.Parse()
	s := newSummary()
	if err := s.read(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "testtimes: reading go test -json from stdin: %v\n", err)
		os.Exit(2)
	}
	out := io.Writer(os.Stdout)
	if *report != "" {
		f, err := os.Create(*report)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testtimes: %v\n", err)
			os.Exit(2)
		}
		defer f.Close()
		out = f
	}
	s.write(out, *tests)
	if *report != "" {
		fmt.Fprintln(out, s.closingLine())
	}
	fmt.Println(s.closingLine())
	if s.failed() {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (see `go doc cmd/test2json`).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Elapsed    float64 // seconds
	Output     string
}

// summary accumulates the events of one `go test -json` run.
type summary struct {
	// buffered holds each running test's output until it ends; it is
	// printed only when the test fails.
	buffered map[string][]string
	// packages maps a package to its wall time in seconds and result.
	packages map[string]result
	// tests maps "package TestName" of top-level tests to their results.
	tests                        map[string]result
	passed, failedCount, skipped int
	failedPackages, failedBuilds int
	packageOrder, testOrder      []string
	// skips are the skipped top-level tests ("package TestName") with the
	// reason their t.Skip gave, in the order they ended.
	skips      []skip
	unfinished map[string]bool
	sawEvent   bool
}

// skip is a skipped top-level test and the last line its t.Skip logged.
type skip struct {
	key, reason string
}

// result is one package's or test's outcome and wall time in seconds.
type result struct {
	action  string
	elapsed float64
}

func newSummary() *summary {
	return &summary{buffered: map[string][]string{}, packages: map[string]result{}, tests: map[string]result{}, unfinished: map[string]bool{}}
}

// read consumes the events on in and writes plain go test output to out.
// Lines that are not JSON (a go command error before any test ran) are
// passed through.
func (s *summary) read(in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		s.sawEvent = true
		s.handle(e, out)
	}
	return sc.Err()
}

func (s *summary) handle(e event, out io.Writer) {
	switch e.Action {
	case "build-output":
		fmt.Fprint(out, e.Output)
		return
	case "build-fail":
		s.failedBuilds++
		return
	}
	if e.Test == "" {
		switch e.Action {
		case "output":
			// Package-level lines: "ok …", "FAIL …", "? … [no test
			// files]", panics outside a test. The bare PASS of a
			// passing package is plain go test's -v output only.
			if e.Output != "PASS\n" {
				fmt.Fprint(out, e.Output)
			}
		case "pass", "fail", "skip":
			if _, seen := s.packages[e.Package]; !seen {
				s.packageOrder = append(s.packageOrder, e.Package)
			}
			s.packages[e.Package] = result{e.Action, e.Elapsed}
			if e.Action == "fail" {
				s.failedPackages++
				// A test still running when its package failed (a
				// timeout, a panic) never gets its own fail event.
				for key := range s.unfinished {
					if strings.HasPrefix(key, e.Package+" ") {
						fmt.Fprint(out, strings.Join(s.buffered[key], ""))
						delete(s.buffered, key)
						delete(s.unfinished, key)
					}
				}
			}
		}
		return
	}
	key := e.Package + " " + e.Test
	switch e.Action {
	case "run":
		s.unfinished[key] = true
	case "output":
		s.buffered[key] = append(s.buffered[key], e.Output)
	case "pass", "fail", "skip":
		delete(s.unfinished, key)
		if e.Action == "fail" {
			fmt.Fprint(out, strings.Join(withRecap(e.Test, s.buffered[key]), ""))
		}
		logged := s.buffered[key]
		delete(s.buffered, key)
		if strings.Contains(e.Test, "/") {
			return // subtests count within their top-level test
		}
		if e.Action == "skip" {
			s.skips = append(s.skips, skip{key, skipReason(logged)})
		}
		switch e.Action {
		case "pass":
			s.passed++
		case "fail":
			s.failedCount++
		case "skip":
			s.skipped++
		}
		if _, seen := s.tests[key]; !seen {
			s.testOrder = append(s.testOrder, key)
		}
		s.tests[key] = result{e.Action, e.Elapsed}
	}
}

// recapLines is how many of a failing test's own lines withRecap repeats.
const recapLines = 12

// testCodeLine matches a line that testing's Log, Error or Fatal wrote
// from a _test.go file ("    dashboard_test.go:187: ..."), at any
// subtest depth.
var testCodeLine = regexp.MustCompile(`^\s+[\w.-]+_test\.go:\d+: `)

// withRecap returns a failing test's output with its last recapLines lines
// written by test code repeated just before its "--- FAIL" line. What a
// test prints after its t.Error (process logs, cleanup chatter) can run to
// hundreds of lines, and a CI log excerpt shows the last few lines before
// "--- FAIL"; the recap keeps the reason there. Output without a
// "--- FAIL" line or without test-code lines is returned as it is.
func withRecap(test string, lines []string) []string {
	end := -1
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(strings.TrimSpace(lines[i]), "--- FAIL: "+test+" ") {
			end = i
			break
		}
	}
	if end < 0 {
		return lines
	}
	var own []string
	for _, l := range lines[:end] {
		if testCodeLine.MatchString(l) {
			own = append(own, l)
		}
	}
	if len(own) == 0 {
		return lines
	}
	own = own[max(0, len(own)-recapLines):]
	out := slices.Clone(lines[:end])
	out = append(out, fmt.Sprintf("    --- recap of %s: its last lines from test code, repeated (its t.Error and t.Fatal among them) ---\n", test))
	out = append(out, own...)
	return append(out, lines[end:]...)
}

// failed reports whether any test, package or build failed, or no event
// was seen at all.
func (s *summary) failed() bool {
	return s.failedCount > 0 || s.failedPackages > 0 || s.failedBuilds > 0 || !s.sawEvent
}

// closingLine is the run's one-line verdict, counting top-level tests.
func (s *summary) closingLine() string {
	return fmt.Sprintf("tests: %d passed, %d failed, %d skipped", s.passed, s.failedCount, s.skipped)
}

// write prints the packages by wall time and the slowest n top-level
// tests (all when n is 0), in seconds.
func (s *summary) write(w io.Writer, n int) {
	pkgs := sortedByElapsed(s.packageOrder, s.packages)
	var total float64
	for _, p := range pkgs {
		total += s.packages[p].elapsed
	}
	fmt.Fprintf(w, "--- test packages by wall time (s; packages run in parallel, so the sum %.0f s exceeds the wall time) ---\n", total)
	for _, p := range pkgs {
		r := s.packages[p]
		fmt.Fprintf(w, "%8.1f  %-4s  %s\n", r.elapsed, r.action, p)
	}
	tests := sortedByElapsed(s.testOrder, s.tests)
	if n > 0 && len(tests) > n {
		tests = tests[:n]
	}
	fmt.Fprintf(w, "--- slowest top-level tests (s) ---\n")
	for _, k := range tests {
		r := s.tests[k]
		pkg, name, _ := strings.Cut(k, " ")
		fmt.Fprintf(w, "%8.1f  %-4s  %s %s\n", r.elapsed, r.action, name, pkg)
	}
	// Every skip is listed, so a test newly skipped (a missing tool, an
	// input a step before make test should have written) shows in the log.
	fmt.Fprintf(w, "--- skipped top-level tests (%d) ---\n", len(s.skips))
	for _, sk := range s.skips {
		pkg, name, _ := strings.Cut(sk.key, " ")
		fmt.Fprintf(w, "%s %s: %s\n", name, pkg, sk.reason)
	}
}

// skipReason returns the last line a skipped test logged before its
// "--- SKIP" line (its t.Skip message), trimmed, or "" when it logged none.
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !strings.HasPrefix(l, "--- SKIP") && !strings.HasPrefix(l, "=== ") {
			return l
		}
	}
	return ""
}

// sortedByElapsed returns keys ordered by elapsed time, longest first,
// keeping the order of first appearance among equal times.
func sortedByElapsed(keys []string, m map[string]result) []string {
	out := slices.Clone(keys)
	slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(m[b].elapsed, m[a].elapsed) })
	return out
}
