package architecture

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// controlPlaneCommands are the packages `make controlplane` builds in
// hack/controlplane (see the Makefile's $(CONTROLPLANE_STAMP) rule).
var controlPlaneCommands = []string{
	"k8s.io/kubernetes/cmd/kube-apiserver",
	"k8s.io/kubernetes/cmd/kube-controller-manager",
	"k8s.io/kubernetes/cmd/kube-scheduler",
}

// compiledFrom returns, for every non-standard package go list -deps
// reaches from args in dir, the module version it is compiled from
// ("path@version", a replacement's when the module is replaced).
func compiledFrom(t *testing.T, dir string, args ...string) map[string]string {
	t.Helper()
	format := `{{if not .Standard}}{{.ImportPath}}	{{with .Module}}{{if .Replace}}{{.Replace.Path}}@{{.Replace.Version}}{{else}}{{.Path}}@{{.Version}}{{end}}{{end}}{{end}}`
	out := map[string]string{}
	for _, line := range goListIn(t, dir, append([]string{"-deps", "-f", format}, args...)...) {
		if pkg, mod, ok := strings.Cut(line, "\t"); ok && mod != "" {
			out[pkg] = mod
		}
	}
	return out
}

// sharedPackageSkew returns, for the packages both builds a and b compile
// (package → "module@version", from compiledFrom), the module versions
// that differ ("module: A in aName, B in bName (N packages)"), sorted, and
// how many packages both compile.
func sharedPackageSkew(a, b map[string]string, aName, bName string) (shared int, skew []string) {
	count := map[string]int{}
	for pkg, av := range a {
		bv, ok := b[pkg]
		if !ok {
			continue
		}
		shared++
		if av != bv {
			mod, aVer, _ := strings.Cut(av, "@")
			_, bVer, _ := strings.Cut(bv, "@")
			count[fmt.Sprintf("%s: %s in %s, %s in %s", mod, aVer, aName, bVer, bName)]++
		}
	}
	for s, n := range count {
		skew = append(skew, fmt.Sprintf("%s (%d packages)", s, n))
	}
	slices.Sort(skew)
	return shared, skew
}

// TestControlPlaneSharesKarpxModuleVersions: every package that both the
// control-plane build (hack/controlplane) and karpx's own build and tests
// compile comes from the same module version in both, and so does every
// package that both etcd's build (hack/etcd) and the control plane's
// compile. Go's build cache then compiles each once on a fresh machine:
// k8s.io/api, apimachinery, client-go, protobuf, golang.org/x/... are
// about half of the control plane's source files, and grpc, otel and the
// etcd client about two thirds of etcd's. One differing version
// (golang.org/x/sys, say) is enough to compile everything above it twice.
// Skipped with -short: it lists the packages of k8s.io/kubernetes.
func TestControlPlaneSharesKarpxModuleVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("lists k8s.io/kubernetes' packages; run without -short (make test does)")
	}
	cp := compiledFrom(t, "../../hack/controlplane", controlPlaneCommands...)
	builds := []struct {
		name string
		pkgs map[string]string
	}{
		{"go.mod", compiledFrom(t, "../..", "-test", "./...")},
		{"hack/etcd/go.mod", compiledFrom(t, "../../hack/etcd", "go.etcd.io/etcd/server/v3")},
	}
	for _, b := range builds {
		shared, skew := sharedPackageSkew(cp, b.pkgs, "hack/controlplane/go.mod", b.name)
		t.Logf("%d packages compiled by the control-plane build, %d by %s's, %d by both", len(cp), len(b.pkgs), b.name, shared)
		if len(skew) > 0 {
			t.Errorf("%d modules have other versions in hack/controlplane/go.mod than in %s, so the packages both builds compile are compiled twice; "+
				"require the newer version in the other module (go get MODULE@VERSION there):\n  %s",
				len(skew), b.name, strings.Join(skew, "\n  "))
		}
	}
}

// TestSharedPackageSkewNamesTheModule: a shared package compiled from two
// versions is reported with its module and both versions; a package only
// one build compiles is not.
func TestSharedPackageSkewNamesTheModule(t *testing.T) {
	cp := map[string]string{
		"golang.org/x/sys/unix": "golang.org/x/sys@v0.38.0",
		"golang.org/x/sys/cpu":  "golang.org/x/sys@v0.38.0",
		"k8s.io/api/core/v1":    "k8s.io/api@v0.35.4",
		"k8s.io/kubernetes/pkg": "k8s.io/kubernetes@v1.35.4",
	}
	kx := map[string]string{
		"golang.org/x/sys/unix":  "golang.org/x/sys@v0.47.0",
		"golang.org/x/sys/cpu":   "golang.org/x/sys@v0.47.0",
		"k8s.io/api/core/v1":     "k8s.io/api@v0.35.4",
		"github.com/karpx/karpx": "github.com/karpx/karpx@",
	}
	shared, skew := sharedPackageSkew(cp, kx, "hack/controlplane/go.mod", "go.mod")
	want := []string{"golang.org/x/sys: v0.38.0 in hack/controlplane/go.mod, v0.47.0 in go.mod (2 packages)"}
	if shared != 3 || !slices.Equal(skew, want) {
		t.Errorf("sharedPackageSkew = %d, %q; want 3, %q", shared, skew, want)
	}
	kx["golang.org/x/sys/unix"], kx["golang.org/x/sys/cpu"] = "golang.org/x/sys@v0.38.0", "golang.org/x/sys@v0.38.0"
	if _, skew := sharedPackageSkew(cp, kx, "a", "b"); len(skew) != 0 {
		t.Errorf("same versions: skew %q, want none", skew)
	}
}
