package cmd

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpx/karpx/plugin"
	"github.com/karpx/karpx/plugin/cluster"
)

func testFactory(serverVersion *version.Info) *cluster.StaticFactory {
	s := cluster.NewScheme()
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}, FakedServerVersion: serverVersion}
	return &cluster.StaticFactory{
		ClientValue:    fake.NewClientBuilder().WithScheme(s).Build(),
		DiscoveryValue: d,
		SchemeValue:    s,
	}
}

// execute runs `kubectl karpx args...` against f and returns stdout,
// stderr and Execute's error.
func execute(t *testing.T, f cluster.Factory, args ...string) (string, string, error) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := newCmdKarpx(f, genericclioptions.NewConfigFlags(true), streams)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

func TestRootHelpListsCommands(t *testing.T) {
	out, _, err := execute(t, testFactory(nil), "--help")
	if err != nil {
		t.Fatal(err)
	}
	root := NewCmdKarpx(genericiooptions.NewTestIOStreamsDiscard())
	var names []string
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	if len(names) < 2 {
		t.Fatalf("root has commands %v, want at least status and version", names)
	}
	for _, name := range append(names, "status", "version") {
		if !strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("root help does not list %q:\n%s", name, out)
		}
	}
	for _, s := range []string{"kubectl karpx [command]", "kubectl karpx status", "--kubeconfig", "--context"} {
		if !strings.Contains(out, s) {
			t.Errorf("root help lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "completion") {
		t.Errorf("root help offers cobra's completion command, which cannot work for a plugin:\n%s", out)
	}
}

func TestSubcommandUsageLines(t *testing.T) {
	for cmd, want := range map[string]string{
		"status":  "kubectl karpx status [--nodepool NAME]",
		"version": "kubectl karpx version [flags]",
	} {
		out, _, err := execute(t, testFactory(nil), cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "Usage:\n  "+want) {
			t.Errorf("%s --help lacks usage %q:\n%s", cmd, want, out)
		}
	}
}

func TestCompletionEntryPoint(t *testing.T) {
	out, _, err := execute(t, testFactory(nil), "__complete", "st")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "status\t") {
		t.Errorf("__complete st = %q, want status first", out)
	}
	out, _, err = execute(t, testFactory(nil), "__complete", "status", "-o", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "\nwide\n") || !strings.Contains(out, "json\n") {
		t.Errorf("__complete status -o = %q, want json and wide", out)
	}
}

func TestErrorsArePrefixed(t *testing.T) {
	_, errOut, err := execute(t, testFactory(nil), "status", "--bogus")
	if err == nil {
		t.Fatal("unknown flag accepted")
	}
	want := "error: unknown flag: --bogus\nSee 'kubectl karpx status --help' for usage\n"
	if errOut != want {
		t.Errorf("stderr = %q, want %q", errOut, want)
	}
}

func TestVersion(t *testing.T) {
	f := testFactory(&version.Info{GitVersion: "v1.35.4", Major: "1", Minor: "35"})
	out, _, err := execute(t, f, "version")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Plugin Version: " + plugin.Version + "\nServer Version: v1.35.4\n"; out != want {
		t.Errorf("version = %q, want %q", out, want)
	}

	out, _, err = execute(t, f, "version", "--client")
	if err != nil || out != "Plugin Version: "+plugin.Version+"\n" {
		t.Errorf("version --client = %q, %v", out, err)
	}

	out, _, err = execute(t, f, "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var info VersionInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("version -o json is not JSON: %v\n%s", err, out)
	}
	if info.PluginVersion != plugin.Version || info.ServerVersion == nil || info.ServerVersion.GitVersion != "v1.35.4" {
		t.Errorf("version -o json = %+v", info)
	}

	var meta struct{ APIVersion, Kind string }
	if err := json.Unmarshal([]byte(out), &meta); err != nil || meta != (struct{ APIVersion, Kind string }{"karpx.io/v1alpha1", "Version"}) {
		t.Errorf("version -o json names %+v, want karpx.io/v1alpha1 Version", meta)
	}

	out, _, err = execute(t, f, "version", "-o", "yaml")
	if err != nil || !strings.Contains(out, "kind: Version\n") || !strings.Contains(out, "pluginVersion: "+plugin.Version+"\n") {
		t.Errorf("version -o yaml = %q, %v", out, err)
	}

	out, _, err = execute(t, f, "version", "-o", "wide")
	if want := "Plugin Version: " + plugin.Version + " (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"; err != nil || !strings.HasPrefix(out, want) || !strings.Contains(out, "Server Version: v1.35.4 (") {
		t.Errorf("version -o wide = %q, %v; want it to start with %q", out, err, want)
	}

	// A version is no resource: -o name gets kubectl's error and exit 2.
	_, errOut, err := execute(t, f, "version", "-o", "name")
	if want := "error: unable to match a printer suitable for the output format \"name\", allowed formats are: json,wide,yaml\n"; err == nil || errOut != want || ExitCode(err) != ExitUsage {
		t.Errorf("version -o name: stderr %q, exit %d; want %q, exit %d", errOut, ExitCode(err), want, ExitUsage)
	}
}

func TestVersionServerUnreachable(t *testing.T) {
	f := testFactory(nil)
	f.DiscoveryValue = nil
	out, errOut, err := execute(t, f, "version")
	if err == nil {
		t.Fatal("no error without a server")
	}
	if out != "Plugin Version: "+plugin.Version+"\n" {
		t.Errorf("stdout = %q, want the plugin version still printed", out)
	}
	if !strings.HasPrefix(errOut, "error: ") {
		t.Errorf("stderr = %q, want an error: line", errOut)
	}
}
