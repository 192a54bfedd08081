package cluster

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// FailureLogDir is where FailureLog writes, under the repository root
// (`make test` empties it when it starts).
const FailureLogDir = "_output/e2e-logs"

// unsafeFileChars are the characters of a test's name that FailureLog
// does not put in a path (a subtest's "/" among them).
var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// FailureLog writes a log that t gathered because it failed (a process's
// output, a control-plane component's log) whole to
// _output/e2e-logs/<test>/<name>.log and logs one line with its path and
// size. Printing such logs into the test's output put hundreds of lines
// after the test's own t.Error and t.Fatal lines, and CI shows only the
// last lines of a failing test's output, so the reason it failed was not
// among them. When the file cannot be written, the last 8 KiB of content
// are logged instead.
func FailureLog(t testing.TB, name string, content []byte) {
	t.Helper()
	bin, err := BinDir()
	if err == nil {
		dir := filepath.Join(filepath.Dir(bin), FailureLogDir, unsafeFileChars.ReplaceAllString(t.Name(), "_"))
		path := filepath.Join(dir, unsafeFileChars.ReplaceAllString(name, "_")+".log")
		if err = os.MkdirAll(dir, 0o755); err == nil {
			if err = os.WriteFile(path, content, 0o644); err == nil {
				t.Logf("%s log (%d bytes): %s", name, len(content), path)
				return
			}
		}
	}
	t.Logf("%s log (last 8 KiB; writing it to %s failed: %v):\n%s", name, FailureLogDir, err, content[max(0, len(content)-8<<10):])
}
