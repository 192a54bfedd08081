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

// sharedPackageSkew returns, for the packages both builds compile, the
// module versions that differ between them ("module: A in hack/controlplane,
// B in karpx"), sorted, with how many shared packages each holds back.
func sharedPackageSkew(controlPlane, karpx map[string]string) (shared int, skew []string) {
	count := map[string]int{}
	for pkg, cp := range controlPlane {
		kx, ok := karpx[pkg]
		if !ok {
			continue
		}
		shared++
		if cp != kx {
			cpMod, cpVer, _ := strings.Cut(cp, "@")
			_, kxVer, _ := strings.Cut(kx, "@")
			count[fmt.Sprintf("%s: %s in hack/controlplane, %s in karpx", cpMod, cpVer, kxVer)]++
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
// compile comes from the same module version in both, so Go's build cache
// compiles it once on a fresh machine: k8s.io/api, apimachinery,
// client-go, apiserver, protobuf, golang.org/x/... are about half of the
// control plane's source files. One differing version (golang.org/x/sys,
// say) is enough to compile everything above it twice. Skipped with
// -short: it lists the packages of k8s.io/kubernetes.
func TestControlPlaneSharesKarpxModuleVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("lists k8s.io/kubernetes' packages; run without -short (make test does)")
	}
	cp := compiledFrom(t, "../../hack/controlplane", controlPlaneCommands...)
	kx := compiledFrom(t, "../..", "-test", "./...")
	shared, skew := sharedPackageSkew(cp, kx)
	t.Logf("%d packages compiled by the control-plane build, %d by karpx's, %d by both", len(cp), len(kx), shared)
	if len(skew) > 0 {
		t.Errorf("%d modules have other versions in hack/controlplane/go.mod than in go.mod, so the packages both builds compile are compiled twice; "+
			"require karpx's version in hack/controlplane (cd hack/controlplane && go get MODULE@VERSION) or the reverse:\n  %s",
			len(skew), strings.Join(skew, "\n  "))
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
	shared, skew := sharedPackageSkew(cp, kx)
	want := []string{"golang.org/x/sys: v0.38.0 in hack/controlplane, v0.47.0 in karpx (2 packages)"}
	if shared != 3 || !slices.Equal(skew, want) {
		t.Errorf("sharedPackageSkew = %d, %q; want 3, %q", shared, skew, want)
	}
	kx["golang.org/x/sys/unix"], kx["golang.org/x/sys/cpu"] = "golang.org/x/sys@v0.38.0", "golang.org/x/sys@v0.38.0"
	if _, skew := sharedPackageSkew(cp, kx); len(skew) != 0 {
		t.Errorf("same versions: skew %q, want none", skew)
	}
}
