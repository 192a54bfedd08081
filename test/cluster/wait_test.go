package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeKubectl puts a kubectl first on PATH that answers the first
// failures calls with out and exit status 1, then succeeds, and counts
// its calls in a file; it returns that file's path.
func fakeKubectl(t *testing.T, failures int, out string) string {
	dir := t.TempDir()
	count := filepath.Join(dir, "calls")
	script := `#!/bin/sh
n=$(cat "` + count + `" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "` + count + `"
if [ $n -le ` + strconv.Itoa(failures) + ` ]; then echo '` + out + `'; exit 1; fi
echo "customresourcedefinition.apiextensions.k8s.io/nodepools.karpenter.sh condition met"
`
	if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return count
}

// calls returns the count fakeKubectl recorded in path.
func calls(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestWaitEstablishedRetriesACRDWithoutStatus: kubectl wait's answer for a
// CRD whose status is not written yet is retried until it succeeds; any
// other failure is returned at once.
func TestWaitEstablishedRetriesACRDWithoutStatus(t *testing.T) {
	c := &Cluster{}
	count := fakeKubectl(t, 2, "error: .status.conditions accessor error: <nil> is of the type <nil>, expected []interface{}")
	if err := c.WaitEstablished(context.Background(), "crd", "--all"); err != nil {
		t.Fatalf("WaitEstablished: %v", err)
	}
	if n := calls(t, count); n != "3" {
		t.Errorf("kubectl called %s times, want 3 (two answers without status, then success)", n)
	}

	// Control: another error is not retried.
	count = fakeKubectl(t, 2, "error: the server does not allow access to the requested resource")
	err := c.WaitEstablished(context.Background(), "crd", "--all")
	if err == nil || !strings.Contains(err.Error(), "does not allow access") {
		t.Fatalf("WaitEstablished = %v, want kubectl's error", err)
	}
	if n := calls(t, count); n != "1" {
		t.Errorf("kubectl called %s times, want 1", n)
	}
}
