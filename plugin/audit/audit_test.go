package audit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	apisv1 "github.com/karpx/karpx/apis/v1"
	kxlint "github.com/karpx/karpx/lint"
	"github.com/karpx/karpx/plugin/cluster"
)

func ptr[T any](v T) *T { return &v }

// liveObjects: an EC2NodeClass whose userData restarts kubelet through a
// variable (KX003, deny), a clean one, and a NodePool pointing at a
// missing EC2NodeClass (KX101, warning).
func liveObjects() []client.Object {
	bad := &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "bounce"}}
	bad.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Alias: "al2023@latest"}}
	bad.Spec.UserData = ptr("#!/bin/bash\nSVC=kubelet\nsystemctl restart $SVC\n")
	good := &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	good.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Alias: "al2023@latest"}}
	good.Spec.UserData = ptr("#!/bin/bash\necho ready\n")
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "missing"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: "kubernetes.io/arch", Operator: "In", Values: []string{"amd64"}}}
	return []client.Object{bad, good, np}
}

func run(t *testing.T, objs []client.Object, args ...string) (string, string, error) {
	t.Helper()
	s := cluster.NewScheme()
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := NewCmd(&cluster.StaticFactory{ClientValue: c, SchemeValue: s}, streams)
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func exitCode(err error) int {
	var coded interface{ ExitCode() int }
	switch {
	case err == nil:
		return 0
	case errors.As(err, &coded):
		return coded.ExitCode()
	}
	return -1
}

func TestAuditLiveObjects(t *testing.T) {
	out, _, err := run(t, liveObjects())
	if exitCode(err) != 1 {
		t.Fatalf("exit %d (%v), want 1 for the KX003 denial\n%s", exitCode(err), err, out)
	}
	for _, want := range []string{"EC2NodeClass/bounce", "KX003", "spec.userData line 3", "NodePool/general", "KX101", "3 object(s) checked: 1 denial(s), 1 warning(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "EC2NodeClass/default") {
		t.Errorf("clean EC2NodeClass reported:\n%s", out)
	}
	// The same cluster without the denial: warnings only pass unless
	// --fail-on=warning.
	objs := liveObjects()[1:]
	if _, _, err := run(t, objs); exitCode(err) != 0 {
		t.Errorf("warnings only: exit %d (%v), want 0", exitCode(err), err)
	}
	if _, _, err := run(t, objs, "--fail-on=warning"); exitCode(err) != 1 {
		t.Errorf("--fail-on=warning: exit %d (%v), want 1", exitCode(err), err)
	}
	if _, _, err := run(t, objs, "--disable", "KX101", "--fail-on=warning"); exitCode(err) != 0 {
		t.Errorf("--disable KX101: exit %d (%v), want 0", exitCode(err), err)
	}
	if _, _, err := run(t, nil); exitCode(err) != 2 {
		t.Errorf("empty cluster: exit %d (%v), want 2", exitCode(err), err)
	}
	for _, bad := range [][]string{{"--fail-on=error"}, {"-o", "name"}, {"--disable", "KX999"}, {"--no-cluster"}} {
		if _, _, err := run(t, objs, bad...); exitCode(err) != 2 {
			t.Errorf("%v: exit %d (%v), want 2", bad, exitCode(err), err)
		}
	}
}

// TestAuditFiles: -f manifests are checked with the live objects, and a
// NodePool in a file may name a live EC2NodeClass.
func TestAuditFiles(t *testing.T) {
	dir := t.TempDir()
	np := `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: from-file}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
`
	if err := os.WriteFile(filepath.Join(dir, "np.yaml"), []byte(np), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, liveObjects()[1:2], "-f", dir, "-o", "json")
	if exitCode(err) != 0 {
		t.Fatalf("exit %d (%v)\n%s", exitCode(err), err, out)
	}
	if !strings.Contains(out, `"kind": "AuditReport"`) || !strings.Contains(out, `"objects": 2`) {
		t.Errorf("report:\n%s", out)
	}
	if _, _, err := run(t, nil, "--no-cluster", "-f", filepath.Join(dir, "nope.yaml")); exitCode(err) != 1 {
		t.Errorf("unreadable -f: exit %d (%v), want 1", exitCode(err), err)
	}
}

// TestSARIFSchema validates -o sarif against the OASIS SARIF 2.1.0 JSON
// schema (testdata/SOURCE.md), for findings from the cluster and from a
// file, and for no findings.
func TestSARIFSchema(t *testing.T) {
	schemaFile, err := os.Open("testdata/sarif-schema-2.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	defer schemaFile.Close()
	doc, err := jsonschema.UnmarshalJSON(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(SARIFSchemaURI, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(SARIFSchemaURI)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad class.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: filed}\nspec:\n  role: r\n  amiSelectorTerms: [{alias: al2023@latest}]\n  subnetSelectorTerms: [{tags: {a: b}}]\n  securityGroupSelectorTerms: [{tags: {a: b}}]\n  userData: |\n    #!/bin/bash\n    echo b > /proc/sysrq-trigger\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		objs []client.Object
		args []string
		code int
		want []string
	}{
		"cluster and file": {liveObjects(), []string{"-o", "sarif", "-f", bad}, 1, []string{`"ruleId": "KX003"`, `"ruleId": "KX101"`, `"uri": "` + filepath.ToSlash(strings.ReplaceAll(bad, " ", "%20")) + `"`}},
		"no findings":      {liveObjects()[1:2], []string{"-o", "sarif"}, 0, []string{`"results": []`}},
	} {
		t.Run(name, func(t *testing.T) {
			out, _, err := run(t, tc.objs, tc.args...)
			if exitCode(err) != tc.code {
				t.Fatalf("exit %d (%v), want %d", exitCode(err), err, tc.code)
			}
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(out)))
			if err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out)
			}
			if err := sch.Validate(inst); err != nil {
				t.Fatalf("SARIF output fails the 2.1.0 schema: %v\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("SARIF lacks %s:\n%s", w, out)
				}
			}
		})
	}
	// The validator is not vacuous: a log without version fails.
	broken, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"runs": [{"tool": {"driver": {}}}]}`))
	if sch.Validate(broken) == nil {
		t.Fatal("schema accepted a log without version and driver name")
	}
}

// audit -f bounds its input as a whole, as lint does: past
// kxlint.MaxInputDocuments reading stops with an error naming the bound
// (exit 1) and later files are not read.
func TestAuditFilesBoundedAsAWhole(t *testing.T) {
	dir := t.TempDir()
	other := "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"
	for f, content := range map[string]string{"a.yaml": strings.Repeat(other, kxlint.MaxInputDocuments), "b.yaml": other} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, err := run(t, liveObjects()[1:2], "-f", dir)
	if exitCode(err) != 1 || !strings.Contains(out+errOut+err.Error(), "more than 10000 documents") {
		t.Fatalf("exit %d (%v), want 1 naming the bound\n%s%s", exitCode(err), err, out, errOut)
	}
	// Control: a.yaml alone is within the bound.
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, liveObjects()[1:2], "-f", dir); exitCode(err) != 0 {
		t.Fatalf("control: exit %d (%v), want 0", exitCode(err), err)
	}
}

// Names from the input reach the terminal escaped (plugin/lint.Sanitize).
func TestAuditOutputEscapesTerminalCharacters(t *testing.T) {
	dir := t.TempDir()
	nc := "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: \"b\\u009b2J\\a\"}\nspec:\n  amiSelectorTerms: [{alias: al2023@latest}]\n  userData: \"#!/bin/bash\\nsystemctl restart kubelet\\n\"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: \"c\\e[31m\"}\n"
	if err := os.WriteFile(filepath.Join(dir, "x\x1b[1m.yaml"), []byte(nc), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := run(t, nil, "--no-cluster", "-f", dir)
	if exitCode(err) != 1 {
		t.Fatalf("exit %d (%v), want 1 (a denial)\n%s%s", exitCode(err), err, out, errOut)
	}
	// cli-runtime's table printer escapes ESC and CR itself, not the C1
	// CSI (U+009B) or BEL.
	if strings.ContainsAny(out+errOut, "\x1b\a\u009b") || !strings.Contains(out, `EC2NodeClass/b\u009b2J\a`) {
		t.Errorf("output holds terminal control characters or lacks the escaped name:\n%q\n%q", out, errOut)
	}
}
