package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/karpx/karpx/test/cluster"
)

// testOutputFormats runs every subcommand through the real `kubectl karpx`
// (bin/kubectl-karpx from make build) with each -o value against c, which
// holds upstreamObjects: json and yaml print a versioned object or List,
// name prints resource/name lines where the output is Kubernetes objects,
// and a format a command cannot print gets kubectl's error and exit 2
// before anything is read.
func testOutputFormats(ctx context.Context, t *testing.T, c *cluster.Cluster, bin string) {
	if _, err := os.Stat(filepath.Join(bin, "kubectl-karpx")); err != nil {
		t.Skip("bin/kubectl-karpx not built: run make build")
	}
	lintFile := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(lintFile, []byte(upstreamObjects), 0o644); err != nil {
		t.Fatal(err)
	}
	karpx := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, "kubectl", append([]string{"karpx"}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			code = ee.ExitCode()
		case err != nil:
			t.Fatalf("kubectl karpx %v: %v", args, err)
		}
		return out.String(), errOut.String(), code
	}
	// kindOf decodes -o json's apiVersion and kind.
	kindOf := func(out string) string {
		var m struct{ APIVersion, Kind string }
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			return "not JSON: " + err.Error()
		}
		return m.APIVersion + " " + m.Kind
	}
	commands := []struct {
		args []string
		// code is the exit status of the table, wide, json and yaml runs
		// (throttle: 3, no karpx controller on this cluster; capacity
		// then lists the NodeClaims' allocatable instead).
		code int
		// jsonKind is "apiVersion kind" of -o json ("" when code != 0).
		jsonKind string
		// wide is a header only -o wide prints ("" when code != 0).
		wide string
		// name is -o name's output; "" means the format is refused.
		name string
	}{
		{[]string{"status"}, 0, "v1 List", "PROVIDER-ID", "nodepool.karpenter.sh/general\nnodeclaim.karpenter.sh/general-abcde\n"},
		{[]string{"nodeclaims"}, 0, "v1 List", "INSTANCE-TYPE", "nodeclaim.karpenter.sh/general-abcde\n"},
		{[]string{"explain", "pod", "web", "-n", "default"}, 0, "karpx.io/v1alpha1 PodExplanation", "NODECLASS", "pod/web\n"},
		{[]string{"lint", "-f", lintFile}, 0, "karpx.io/v1alpha1 LintReport", "", ""},
		{[]string{"version"}, 0, "karpx.io/v1alpha1 Version", "", ""},
		{[]string{"throttle"}, ExitNegative, "", "", ""},
		{[]string{"capacity"}, 0, "karpx.io/v1alpha1 NodeClaimCapacityReport", "EPHEMERAL-STORAGE", ""},
	}
	for _, tc := range commands {
		t.Run(tc.args[0], func(t *testing.T) {
			table, errOut, code := karpx(tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, table, errOut)
			}
			wide, errOut, code := karpx(append(tc.args, "-o", "wide")...)
			if code != tc.code || (tc.wide != "" && (!strings.Contains(wide, tc.wide) || strings.Contains(table, tc.wide))) {
				t.Errorf("-o wide: exit %d, want %d and column %s only in wide\n%s%s\n---\n%s", code, tc.code, tc.wide, wide, errOut, table)
			}
			out, errOut, code := karpx(append(tc.args, "-o", "json")...)
			if code != tc.code || (tc.jsonKind != "" && kindOf(out) != tc.jsonKind) {
				t.Errorf("-o json: exit %d, %s; want exit %d, %s\n%s%s", code, kindOf(out), tc.code, tc.jsonKind, out, errOut)
			}
			out, errOut, code = karpx(append(tc.args, "-o", "yaml")...)
			if code != tc.code || (tc.jsonKind != "" && !strings.Contains(out, "kind: "+strings.Fields(tc.jsonKind)[1]+"\n")) {
				t.Errorf("-o yaml: exit %d, want %d and kind %s\n%s%s", code, tc.code, tc.jsonKind, out, errOut)
			}
			out, errOut, code = karpx(append(tc.args, "-o", "name")...)
			switch {
			case tc.name != "" && (code != 0 || out != tc.name):
				t.Errorf("-o name: exit %d, %q; want 0, %q\n%s", code, out, tc.name, errOut)
			case tc.name == "" && tc.args[0] == "lint" && (code != 0 || out != ""):
				// lint names the objects with findings: none here.
				t.Errorf("lint -o name: exit %d, %q; want 0 and no object\n%s", code, out, errOut)
			case tc.name == "" && tc.args[0] != "lint" && (code != ExitUsage || out != "" ||
				!strings.HasPrefix(errOut, `error: unable to match a printer suitable for the output format "name", allowed formats are: json,wide,yaml`)):
				t.Errorf("-o name: exit %d, stdout %q, stderr %q; want %d and kubectl's unsupported-format error", code, out, errOut, ExitUsage)
			}
			if _, errOut, code := karpx(append(tc.args, "-o", "bogus")...); code != ExitUsage || !strings.Contains(errOut, `output format "bogus"`) {
				t.Errorf("-o bogus: exit %d, stderr %q; want %d", code, errOut, ExitUsage)
			}
		})
	}
}
