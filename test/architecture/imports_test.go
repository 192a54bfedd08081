package architecture

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/karpx/karpx"

// rule forbids packages whose import path starts with one of from to
// depend (directly or not) on a package starting with one of to.
type rule struct {
	from, to []string
	why      string
}

// rules are the module's layering rules.
var rules = []rule{
	{
		from: []string{module + "/autoscaler/scheduling"},
		to:   []string{module + "/autoscaler/aws", "github.com/aws/aws-sdk-go-v2", module + "/autoscaler/controllers"},
		why:  "scheduling is a pure pipeline (pods → NodeClaim plans) behind the cloudprovider seam: no cloud calls, no controllers",
	},
	{
		from: []string{module + "/autoscaler/aws/cloudprovider", module + "/autoscaler/aws/providers", module + "/autoscaler/aws/ec2api", module + "/autoscaler/aws/budget",
			module + "/autoscaler/aws/batcher", module + "/autoscaler/aws/cache", module + "/autoscaler/aws/capacity", module + "/autoscaler/aws/hydration", module + "/autoscaler/aws/clusterinfo"},
		to:  []string{module + "/autoscaler/controllers", module + "/autoscaler/aws/controllers", module + "/autoscaler/operator"},
		why: "the AWS cloud provider, its providers, the EC2 client and its caches sit below every controller (controllers call them, never the reverse)",
	},
	{
		from: []string{module + "/apis", module + "/catalog", module + "/lint", module + "/requirements"},
		to:   []string{module + "/autoscaler", module + "/plugin", module + "/webhook", module + "/ec2sim"},
		why:  "API types, the catalogue, requirement matching and the lint rules are leaves the autoscaler, webhook and plugin share",
	},
	{
		from: []string{module + "/requirements"},
		to:   []string{module + "/lint"},
		why:  "requirement matching is below the lint rules that use it",
	},
}

// shipped are the binaries a user runs; nothing they link may be a test
// harness or the simulator.
var shipped = []string{"./cmd/karpx-controller", "./cmd/karpx-webhook", "./cmd/kubectl-karpx"}

// shippedForbidden are what the shipped binaries must not link: the EC2
// simulator, the test harnesses, hack/ tools, and test-helper packages
// (named like net/http/httptest).
func shippedForbidden(pkg string) bool {
	if hasPrefix(pkg, []string{module + "/ec2sim", module + "/test", module + "/hack"}) {
		return true
	}
	return strings.HasPrefix(pkg, module+"/") && strings.HasSuffix(pkg, "test")
}

// goList runs go list in the module root with args and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	return goListIn(t, "../..", args...)
}

// goListIn runs go list in dir with args and returns its lines.
func goListIn(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// hasPrefix reports whether pkg is one of prefixes or below one.
func hasPrefix(pkg string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return pkg == p || strings.HasPrefix(pkg, p+"/") })
}

// violations returns "pkg → dep (why)" for every dependency deps (package
// → its transitive non-test dependencies) has against rules.
func violations(deps map[string][]string, rules []rule) []string {
	var out []string
	for pkg, ds := range deps {
		for _, r := range rules {
			if !hasPrefix(pkg, r.from) {
				continue
			}
			for _, d := range ds {
				if hasPrefix(d, r.to) {
					out = append(out, pkg+" → "+d+" ("+r.why+")")
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestLayering checks every package of the module against rules.
func TestLayering(t *testing.T) {
	deps := map[string][]string{}
	for _, line := range goList(t, "-f", "{{.ImportPath}}: {{join .Deps \" \"}}", "./...") {
		pkg, ds, _ := strings.Cut(line, ": ")
		deps[pkg] = strings.Fields(ds)
	}
	if len(deps) < 10 {
		t.Fatalf("go list found %d packages; want the whole module", len(deps))
	}
	for _, r := range rules {
		covered := false
		for pkg := range deps {
			covered = covered || hasPrefix(pkg, r.from)
		}
		if !covered {
			t.Errorf("rule on %v matches no package (moved?): %s", r.from, r.why)
		}
	}
	for _, v := range violations(deps, rules) {
		t.Errorf("forbidden import: %s", v)
	}
}

// TestShippedBinariesLinkNoTestCode checks what the shipped binaries link.
func TestShippedBinariesLinkNoTestCode(t *testing.T) {
	linked := goList(t, append([]string{"-deps"}, shipped...)...)
	if !slices.Contains(linked, module+"/autoscaler/operator") {
		t.Fatalf("go list -deps %v lacks the operator package: %d packages", shipped, len(linked))
	}
	for _, pkg := range linked {
		if shippedForbidden(pkg) {
			t.Errorf("a shipped binary (%v) links %s: the simulator, test harnesses and test helpers stay out of them", shipped, pkg)
		}
	}
}

// TestViolationsFindsForbiddenEdges is the control: on a made-up graph the
// same check reports a forbidden dependency and passes allowed ones, and
// shippedForbidden flags the simulator and a test helper.
func TestViolationsFindsForbiddenEdges(t *testing.T) {
	deps := map[string][]string{
		module + "/autoscaler/scheduling":           {module + "/autoscaler/cloudprovider", "github.com/aws/aws-sdk-go-v2/service/ec2"},
		module + "/autoscaler/aws/providers/subnet": {module + "/autoscaler/aws/ec2api"},
		module + "/autoscaler/schedulingx":          {"github.com/aws/aws-sdk-go-v2/aws"},
	}
	got := violations(deps, rules)
	if len(got) != 1 || !strings.HasPrefix(got[0], module+"/autoscaler/scheduling → github.com/aws/aws-sdk-go-v2/service/ec2 (") {
		t.Errorf("violations = %q, want only scheduling → the EC2 SDK", got)
	}
	for pkg, want := range map[string]bool{
		module + "/ec2sim":                           true,
		module + "/ec2sim/kubelet":                   true,
		module + "/autoscaler/aws/ec2api/ec2apitest": true,
		module + "/test/cluster":                     true,
		module + "/autoscaler/aws/ec2api":            false,
		module + "/autoscaler/operator":              false,
	} {
		if shippedForbidden(pkg) != want {
			t.Errorf("shippedForbidden(%s) = %t, want %t", pkg, !want, want)
		}
	}
}
