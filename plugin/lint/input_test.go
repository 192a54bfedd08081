package lint

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	kxlint "github.com/karpx/karpx/lint"
)

const okClass = `{"apiVersion":"karpenter.k8s.aws/v1","kind":"EC2NodeClass","metadata":{"name":"a"},"spec":{"role":"r","amiSelectorTerms":[{"alias":"al2023@latest"}],"subnetSelectorTerms":[{"id":"subnet-1"}],"securityGroupSelectorTerms":[{"id":"sg-1"}]}}`

const restartClass = `{"apiVersion":"karpenter.k8s.aws/v1","kind":"EC2NodeClass","metadata":{"name":"b"},"spec":{"role":"r","amiSelectorTerms":[{"alias":"al2023@latest"}],"subnetSelectorTerms":[{"id":"subnet-1"}],"securityGroupSelectorTerms":[{"id":"sg-1"}],"userData":"#!/bin/bash\nsystemctl restart kubelet\n"}}`

// runStreams is run with separate stdout and stderr.
func runStreams(t *testing.T, stdin io.Reader, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut strings.Builder
	cmd := NewCmd(genericiooptions.IOStreams{In: stdin, Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

// Two JSON objects back to back are two objects, as kubectl apply reads
// them: the second one's denial must be found.
func TestConcatenatedJSON(t *testing.T) {
	out, _, err := runStreams(t, strings.NewReader(okClass+restartClass), "-f", "-")
	var de *DeniedError
	if !errors.As(err, &de) || !strings.Contains(out, "2 object(s) checked") || !regexp.MustCompile(`\n-\s+2\s+EC2NodeClass/b\s+deny\s+KX003 spec.userData line 2: `).MatchString(out) {
		t.Fatalf("got %v\n%s", err, out)
	}
	// Control: the first object alone passes.
	if out, _, err := runStreams(t, strings.NewReader(okClass), "-f", "-"); err != nil || !strings.Contains(out, "1 object(s) checked: 0 denial(s)") {
		t.Fatalf("control: %v\n%s", err, out)
	}
}

func TestSkippedDocumentsReported(t *testing.T) {
	cases := []struct{ name, input, reason string }{
		{"v1beta1", "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: a}\n", "karpenter.sh/v1beta1 is not served by Karpenter v1"},
		{"misspelt kind", "apiVersion: karpenter.sh/v1\nkind: Nodepool\nmetadata: {name: a}\n", `kind "Nodepool" is not served by karpenter.sh/v1 (kinds are case-sensitive); did you mean NodePool?`},
		{"no apiVersion", "kind: NodePool\nmetadata: {name: a}\n", "has no apiVersion"},
		{"scalar", "just a string\n", "is a string, not a Kubernetes object"},
		{"other kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", "not a NodePool or EC2NodeClass"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := runStreams(t, strings.NewReader(tc.input), "-f", "-")
			var nc *NothingCheckedError
			if !errors.As(err, &nc) || nc.ExitCode() != 2 || nc.Skipped != 1 {
				t.Fatalf("want NothingCheckedError (exit 2), got %v", err)
			}
			if !strings.Contains(errOut, "warning: - (document 1)") || !strings.Contains(errOut, tc.reason) {
				t.Fatalf("stderr lacks %q:\n%s", tc.reason, errOut)
			}
			if strings.Contains(errOut, "{") || !strings.Contains(out, "0 object(s) checked") {
				t.Fatalf("unexpected output:\nstdout %s\nstderr %s", out, errOut)
			}
			// Next to a checked object the skip is still reported, but
			// the exit status is the check's.
			_, errOut, err = runStreams(t, strings.NewReader(tc.input+"---\n"+okClass), "-f", "-")
			if err != nil || !strings.Contains(errOut, tc.reason) {
				t.Fatalf("with a valid object: %v\n%s", err, errOut)
			}
		})
	}
	t.Run("empty file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "empty.yaml")
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := runStreams(t, nil, "-f", f)
		var nc *NothingCheckedError
		if !errors.As(err, &nc) || nc.Skipped != 0 {
			t.Fatalf("want NothingCheckedError, got %v", err)
		}
	})
}

// NodePools the API server rejects are denied with its message (KX011);
// a negative limit, which it accepts, is KX106.
func TestNodePoolsTheAPIServerRejects(t *testing.T) {
	np := func(reqs, extra string) string {
		return `{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"np"},"spec":{` + extra + `"template":{"spec":{"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"a"},"requirements":[` + reqs + `]}}}}` + okClass
	}
	gen := `{"key":"karpenter.k8s.aws/instance-generation","operator":"Gt","values":[%s]}`
	cases := []struct{ name, input, rule, message string }{
		{"Gt abc", np(strings.Replace(gen, "%s", `"abc"`, 1), ""), "KX011", "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"},
		{"Gt 2.5", np(strings.Replace(gen, "%s", `"2.5"`, 1), ""), "KX011", "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"},
		{"minValues above values", np(`{"key":"karpenter.k8s.aws/instance-category","operator":"In","values":["c","m"],"minValues":3}`, ""), "KX011", "requirements with 'minValues' must have at least that many values specified in the 'values' field"},
		{"unknown field", np("", `"maxNodes":3,`), "KX011", `unknown field "spec.maxNodes"`},
		{"negative cpu limit", np("", `"limits":{"cpu":"-1"},`), "KX106", "is -1; a negative limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runStreams(t, strings.NewReader(tc.input), "-f", "-", "-o", "json")
			var r Report
			if jerr := json.Unmarshal([]byte(out), &r); jerr != nil {
				t.Fatalf("bad JSON %v: %s", jerr, out)
			}
			var de *DeniedError
			found := false
			for _, f := range r.Findings {
				if f.RuleID == tc.rule && f.Severity == kxlint.SeverityDeny && strings.Contains(f.Message, tc.message) && f.Kind == "NodePool" {
					found = true
				}
			}
			if !errors.As(err, &de) || !found {
				t.Fatalf("want %s %q, got %v: %+v", tc.rule, tc.message, err, r.Findings)
			}
		})
	}
	// Control: the same NodePool with a valid Gt passes.
	if out, _, err := runStreams(t, strings.NewReader(np(strings.Replace(gen, "%s", `"2"`, 1), "")), "-f", "-"); err != nil {
		t.Fatalf("control: %v\n%s", err, out)
	}
}

// zeros is an endless stream of NUL bytes that counts what was read.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

func TestInputIsCapped(t *testing.T) {
	z := &zeros{}
	out, _, err := runStreams(t, z, "-f", "-", "-o", "json")
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("want InputError, got %v", err)
	}
	var r Report
	if jerr := json.Unmarshal([]byte(out), &r); jerr != nil || len(r.Errors) != 1 || !strings.Contains(r.Errors[0].Message, "larger than 7340032 bytes") {
		t.Fatalf("JSON report: %v %s", jerr, out)
	}
	if limit := int64(kxlint.MaxObjectBytes + 1<<20); z.n > limit {
		t.Fatalf("read %d bytes of an endless stream, want at most %d", z.n, limit)
	}
}

// Binary input gives a short error of printable text.
func TestBinaryInputErrorIsPrintable(t *testing.T) {
	bin := []byte("apiVersion: v1\nkind: \x00\xff\xfe\x1b[31m: : :\n\t- ]\x07")
	_, errOut, err := runStreams(t, strings.NewReader(string(bin)), "-f", "-")
	if err == nil {
		t.Fatal("want an error")
	}
	if !utf8.ValidString(errOut) || strings.ContainsAny(errOut, "\x00\x1b\x07") || len(errOut) > 400 {
		t.Fatalf("unprintable or long error: %q", errOut)
	}
}

// The real `kubectl karpx lint`, as built by `make build`: exit codes 0,
// 1 and 2, and /dev/zero rejected without unbounded memory.
func TestKubectlKarpxLintExitCodes(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not in PATH")
	}
	bin := filepath.Join(examplesDir(t), "..", "..", "..", "bin")
	if _, err := os.Stat(filepath.Join(bin, "kubectl-karpx")); err != nil {
		t.Skip("bin/kubectl-karpx not built: run make build")
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name string
		file string
		code int
	}{
		{"clean", write("ok.json", okClass), 0},
		{"denied", write("bad.json", okClass+restartClass), 1},
		{"nothing checked", write("old.yaml", "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: a}\n"), 2},
		{"endless input", "/dev/zero", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(kubectl, "karpx", "lint", "-f", tc.file)
			cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", code, tc.code, out)
			}
			if tc.file == "/dev/zero" {
				if !strings.Contains(string(out), "larger than 7340032 bytes") {
					t.Fatalf("output: %s", out)
				}
				if rss := ee.ProcessState.SysUsage(); rss != nil {
					t.Logf("rusage: %+v", rss)
				}
			}
		})
	}
}

// A run's input is bounded as a whole: past MaxInputDocuments the run
// stops reading with an error naming the bound (exit 1), and the files
// after it are not read.
func TestInputBoundedAsAWhole(t *testing.T) {
	dir := t.TempDir()
	other := "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"
	files := map[string]string{
		"a.yaml": okClass + "\n" + strings.Repeat(other, kxlint.MaxInputDocuments-1),
		"b.yaml": other,
	}
	for f, content := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err := runStreams(t, nil, "-f", dir, "-o", "json")
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("got %v, want an InputError", err)
	}
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0].Message, "more than 10000 documents") || rep.Errors[0].Source != filepath.Join(dir, "b.yaml") {
		t.Fatalf("errors %+v, want one naming the bound in b.yaml", rep.Errors)
	}
	if rep.Objects != 1 || len(rep.Skipped) != kxlint.MaxInputDocuments-1 {
		t.Errorf("checked %d objects and skipped %d, want everything read before the bound", rep.Objects, len(rep.Skipped))
	}
	// Control: one file alone is within the bound.
	if _, _, err := runStreams(t, nil, "-f", filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatalf("control: %v", err)
	}
}
