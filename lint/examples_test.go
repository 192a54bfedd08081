package lint

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/karpx/karpx/lint/crdschema"
	"github.com/karpx/karpx/manifests/crds"
)

func exampleSchema(t testing.TB) SchemaValidator {
	t.Helper()
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	v, err := crdschema.New(all...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// examplesDir returns test/testdata/karpenter-examples under the
// repository root (the directory holding go.mod): Karpenter's upstream
// example manifests.
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
	ex := filepath.Join(dir, "test", "testdata", "karpenter-examples")
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
		data, err := io.ReadAll(fh)
		if err != nil {
			t.Fatal(err)
		}
		data = bytes.ReplaceAll(data, []byte("${CLUSTER_NAME}"), []byte("test"))
		objs, skipped, err := DecodeObjects(bytes.NewReader(data), filepath.Base(f))
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(skipped) != 0 {
			t.Fatalf("%s: skipped %+v", f, skipped)
		}
		if len(objs) == 0 {
			t.Fatalf("%s: no NodePool or EC2NodeClass", f)
		}
		out[filepath.Base(f)] = objs
	}
	return out
}

// schemaRejected lists the shared examples whose NodePool Karpenter's own
// CRD rejects on a real API server, with the API server's message:
// windows-custom-userdata.yaml sets nodeClassRef.group to
// "karpenter.k8s.aws/v1", which fails the pattern ^[^/]*$. lint must
// report exactly that (KX011), and nothing else may deny.
var schemaRejected = map[string]string{
	"windows-custom-userdata.yaml": `spec.template.spec.nodeClassRef.group: Invalid value: "karpenter.k8s.aws/v1": spec.template.spec.nodeClassRef.group in body should match '^[^/]*$'`,
}

// unsupportedDenied lists the shared examples that set a field karpx does
// not implement yet, with the one KX2xx finding lint must report ("rule
// field"): instance-store-ephemeral-storage.yaml asks for RAID0 instance
// store, which karpx would leave unformatted.
var unsupportedDenied = map[string]string{
	"instance-store-ephemeral-storage.yaml": RuleUnsupportedEC2NodeClassField + " spec.instanceStorePolicy",
}

// Every shared Karpenter example must be admitted: no denial but the
// API server's own schema rejection and the fields karpx does not
// implement yet (unsupportedDenied), and no userData finding at all (the
// unsafe-content rules must not fire on legitimate userData).
func TestSharedExamplesAdmitted(t *testing.T) {
	schema := exampleSchema(t)
	for name, objs := range loadExamples(t) {
		t.Run(name, func(t *testing.T) {
			fs := LintObjects(context.Background(), objs, nil, schema)
			schemaDenials, unsupported := 0, 0
			for _, f := range fs {
				t.Logf("%s", f.Finding.String())
				if strings.HasPrefix(f.RuleID, "KX2") {
					unsupported++
					if want := unsupportedDenied[name]; want == "" || f.RuleID+" "+f.Field != want || !strings.Contains(f.Message, NotSupportedYet) {
						t.Errorf("unsupported-field denial %q, want %q", f.Finding.String(), want)
					}
					continue
				}
				if f.RuleID == RuleCRDSchema {
					schemaDenials++
					if want := schemaRejected[name]; want == "" || f.Field+": "+f.Message != want {
						t.Errorf("schema denial %q, want %q", f.Field+": "+f.Message, want)
					}
					continue
				}
				if f.Severity == SeverityDeny {
					t.Errorf("denied: %s", f.Finding.String())
				}
				if f.RuleID < "KX100" {
					t.Errorf("userData rule fired on a legitimate example: %s", f.Finding.String())
				}
			}
			if want := schemaRejected[name]; want != "" && schemaDenials != 1 {
				t.Errorf("want exactly one KX011 %q, got %d", want, schemaDenials)
			}
			if want := unsupportedDenied[name]; want != "" && unsupported != 1 {
				t.Errorf("want exactly one %q, got %d", want, unsupported)
			}
		})
	}
}
