package cluster

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestFailureLogWritesTheWholeLog: FailureLog writes all of content under
// _output/e2e-logs/<test>/ with the name made safe for a path.
func TestFailureLogWritesTheWholeLog(t *testing.T) {
	bin, err := BinDir()
	if err != nil {
		t.Skip(err)
	}
	dir := filepath.Join(filepath.Dir(bin), FailureLogDir, "TestFailureLogWritesTheWholeLog")
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	content := bytes.Repeat([]byte("a log line\n"), 2000) // 22,000 bytes: more than the 8 KiB fallback
	FailureLog(t, "karpx-controller karpx/one", content)
	got, err := os.ReadFile(filepath.Join(dir, "karpx-controller_karpx_one.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content) {
		t.Errorf("the file holds %d bytes, want all %d", len(got), len(content))
	}
}
