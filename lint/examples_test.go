package lint

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// examplesDir returns ../shared/data/karpenter-examples relative to the
// repository root (the directory holding go.mod), where the project keeps
// Karpenter's upstream example manifests.
func examplesDir(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("go.mod not found above %s", file)
		}
		dir = parent
	}
	ex := filepath.Join(dir, "..", "shared", "data", "karpenter-examples")
	if _, err := os.Stat(ex); err != nil {
		t.Skipf("shared examples not found at %s: %v", ex, err)
	}
	return ex
}

func loadExamples(t testing.TB) map[string][]Object {
	t.Helper()
	dir := examplesDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s: %v", dir, err)
	}
	out := map[string][]Object{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := DecodeObjects(fh, filepath.Base(f))
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(objs) == 0 {
			t.Fatalf("%s: no NodePool or EC2NodeClass", f)
		}
		out[filepath.Base(f)] = objs
	}
	return out
}

// Every shared Karpenter example must be admitted: no denial, and no
// userData finding at all (the unsafe-content rules must not fire on
// legitimate userData).
func TestSharedExamplesAdmitted(t *testing.T) {
	for name, objs := range loadExamples(t) {
		t.Run(name, func(t *testing.T) {
			fs := LintObjects(context.Background(), objs, nil)
			for _, f := range fs {
				t.Logf("%s", f.Finding.String())
				if f.Severity == SeverityDeny {
					t.Errorf("denied: %s", f.Finding.String())
				}
				if f.RuleID < "KX100" {
					t.Errorf("userData rule fired on a legitimate example: %s", f.Finding.String())
				}
			}
		})
	}
}
