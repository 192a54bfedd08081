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
// depend (directly or not) on a package starting with one of to. The
// packages of allow (exact import paths) are exempt: edges that exist for a
// reason the rule's why names, listed one by one so no new one appears.
type rule struct {
	from, to []string
	allow    []string
	why      string
}

// awsSDKServices are the AWS SDK's service clients (EC2, SSM, IAM, SQS ...).
const awsSDKServices = "github.com/aws/aws-sdk-go-v2/service"

// controllerRoots are the trees whose packages are controllers: the
// cloud-neutral ones and the AWS ones. A controller package may depend on
// no other controller package but its own subpackages (checked by
// controllerViolations).
var controllerRoots = []string{module + "/autoscaler/controllers", module + "/autoscaler/aws/controllers"}

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
		from: []string{module + "/plugin"},
		to:   append([]string{awsSDKServices, module + "/autoscaler/operator"}, controllerRoots...),
		why:  "kubectl karpx reads the cluster and the controller's endpoints; it shares state and seam types, never a controller or an AWS SDK client (TestPluginLinksNoControllerOrAWSSDK checks the binary)",
	},
	{
		from: []string{module + "/autoscaler/controllers"},
		to:   []string{module + "/autoscaler/aws", "github.com/aws/aws-sdk-go-v2"},
		why:  "the cloud-neutral controllers reach the cloud through the seam (autoscaler/cloudprovider) only; AWS code and its controllers live under autoscaler/aws",
	},
	{
		from: controllerRoots,
		to:   []string{module + "/webhook"},
		why:  "the webhook is its own binary; what a controller shares with it lives below both (catalog/startuptaints, lint)",
	},
	{
		from:  []string{module + "/autoscaler/aws/providers"},
		to:    []string{module + "/autoscaler/cloudprovider"},
		allow: []string{module + "/autoscaler/aws/providers/instance", module + "/autoscaler/aws/providers/instancetype", module + "/autoscaler/aws/providers/instanceprofile"},
		why: "providers answer in AWS terms and autoscaler/aws/cloudprovider translates them to the seam; instance (the seam's typed launch errors) " +
			"and instancetype (the seam's InstanceType) still build seam values, as karpenter-provider-aws's do, and instanceprofile reaches the seam " +
			"only through instance's tag keys: the only exceptions",
	},
	{
		from: []string{module + "/autoscaler/state"},
		to:   append([]string{module + "/autoscaler/aws", module + "/autoscaler/operator", module + "/webhook", "github.com/aws/aws-sdk-go-v2"}, controllerRoots...),
		why:  "cloud-neutral state sits below the controllers and the plugin that share it and knows no cloud",
	},
	{
		from: []string{module + "/autoscaler/cloudprovider"},
		to:   []string{module + "/autoscaler/aws", module + "/autoscaler/state", module + "/autoscaler/scheduling", module + "/autoscaler/operator", "github.com/aws/aws-sdk-go-v2", controllerRoots[0]},
		why:  "the seam holds cloud-neutral types only; everything else depends on it",
	},
	{
		from: []string{module + "/apis", module + "/catalog", module + "/lint", module + "/requirements"},
		to:   []string{module + "/autoscaler", module + "/plugin", module + "/webhook", module + "/ec2sim"},
		why:  "API types, the catalogue, requirement matching and the lint rules are leaves the autoscaler, webhook and plugin share",
	},
	{
		from: []string{module + "/autoscaler/aws/budget/budgetstatus"},
		to:   []string{"github.com/aws", module + "/autoscaler/cloudprovider", module + "/autoscaler/aws/ec2api"},
		why:  "the budget's JSON status is the one declaration the controller serves and kubectl karpx decodes: the plugin imports it, so it links no AWS SDK",
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
			if !hasPrefix(pkg, r.from) || slices.Contains(r.allow, pkg) {
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

// controllerViolations returns "pkg → dep" for every controller package
// (under one of roots) that depends on another controller package other
// than its own subpackages: controllers share code through the packages
// below them (the seam, state, scheduling), never through a sibling.
func controllerViolations(deps map[string][]string, roots []string) []string {
	var out []string
	for pkg, ds := range deps {
		if !hasPrefix(pkg, roots) {
			continue
		}
		for _, d := range ds {
			if hasPrefix(d, roots) && !hasPrefix(d, []string{pkg}) {
				out = append(out, pkg+" → "+d+" (a controller depends on no other controller; move what both need below them)")
			}
		}
	}
	slices.Sort(out)
	return out
}

// pluginDepProblems returns the packages of linked (go list -deps of the
// kubectl-karpx command) that the plugin must not link: an AWS SDK service
// client or a controller.
func pluginDepProblems(linked []string) []string {
	var out []string
	for _, pkg := range linked {
		if hasPrefix(pkg, append([]string{awsSDKServices}, controllerRoots...)) {
			out = append(out, pkg)
		}
	}
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
	for _, r := range rules {
		for _, a := range r.allow {
			if _, ok := deps[a]; !ok {
				t.Errorf("rule on %v allows %s, which does not exist (moved or removed? drop it from allow)", r.from, a)
			}
		}
	}
	controllers := 0
	for pkg := range deps {
		if hasPrefix(pkg, controllerRoots) {
			controllers++
		}
	}
	if controllers < 5 {
		t.Errorf("found %d controller packages under %v; want every controller (moved?)", controllers, controllerRoots)
	}
	for _, v := range controllerViolations(deps, controllerRoots) {
		t.Errorf("forbidden import: %s", v)
	}
}

// TestPluginLinksNoControllerOrAWSSDK checks what kubectl-karpx links: no
// AWS SDK service client and no controller (issue 30: it linked four
// controllers, the webhook and the EC2, IAM, SQS and SSM clients through
// one annotation key).
func TestPluginLinksNoControllerOrAWSSDK(t *testing.T) {
	linked := goList(t, "-deps", "./cmd/kubectl-karpx")
	if !slices.Contains(linked, module+"/plugin/cmd") {
		t.Fatalf("go list -deps ./cmd/kubectl-karpx lacks plugin/cmd: %d packages", len(linked))
	}
	for _, pkg := range pluginDepProblems(linked) {
		t.Errorf("kubectl-karpx links %s: the plugin links no controller and no AWS SDK service client", pkg)
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

// TestEveryRuleFindsAPlantedEdge is the control of every rule: a made-up
// package under each rule's first from-tree that depends on a made-up
// package under each of its to-trees is reported, with the rule's reason,
// and the same package without that dependency is not.
func TestEveryRuleFindsAPlantedEdge(t *testing.T) {
	for _, r := range rules {
		pkg := r.from[0] + "/planted"
		for _, to := range r.to {
			dep := to + "/planted"
			got := violations(map[string][]string{pkg: {dep}}, []rule{r})
			if want := pkg + " → " + dep + " (" + r.why + ")"; len(got) != 1 || got[0] != want {
				t.Errorf("planted %s → %s: violations = %q, want [%q]", pkg, dep, got, want)
			}
		}
		if got := violations(map[string][]string{pkg: {module + "/requirements", "k8s.io/api/core/v1"}}, []rule{r}); len(got) != 0 {
			t.Errorf("rule on %v reports allowed edges: %q", r.from, got)
		}
		for _, a := range r.allow {
			if got := violations(map[string][]string{a: {r.to[0]}}, []rule{r}); len(got) != 0 {
				t.Errorf("rule on %v reports its allowed package %s: %q", r.from, a, got)
			}
		}
	}
}

// TestControllerViolationsFindsSiblings is the control of the controller
// rule: a controller depending on a sibling (cloud-neutral or AWS, directly
// or not) is reported; its own subpackage and the shared packages below the
// controllers are not.
func TestControllerViolationsFindsSiblings(t *testing.T) {
	c := module + "/autoscaler/controllers/"
	a := module + "/autoscaler/aws/controllers/"
	deps := map[string][]string{
		c + "disruption":                {c + "provisioning", module + "/autoscaler/state/clusterstate"},
		c + "nodeclaim/lifecycle":       {module + "/autoscaler/cloudprovider", c + "termination"},
		a + "interruption":              {a + "interruption/messages", module + "/autoscaler/aws/providers/sqs"},
		a + "interruption/messages":     {a + "interruption"},
		a + "nodeclass/status":          {c + "disruption"},
		c + "provisioning":              {module + "/autoscaler/trigger", module + "/autoscaler/scheduling"},
		module + "/autoscaler/operator": {c + "provisioning", a + "interruption"},
	}
	got := controllerViolations(deps, controllerRoots)
	var edges []string
	for _, v := range got {
		edge, _, _ := strings.Cut(v, " (")
		edges = append(edges, strings.ReplaceAll(edge, module+"/autoscaler/", ""))
	}
	want := []string{
		"aws/controllers/interruption/messages → aws/controllers/interruption",
		"aws/controllers/nodeclass/status → controllers/disruption",
		"controllers/disruption → controllers/provisioning",
		"controllers/nodeclaim/lifecycle → controllers/termination",
	}
	if !slices.Equal(edges, want) {
		t.Errorf("controllerViolations = %q, want %q", edges, want)
	}
}

// TestPluginDepProblemsFindsControllersAndSDK is the control of
// TestPluginLinksNoControllerOrAWSSDK: an SDK service client and a
// controller of either tree in a dependency list are reported; the SDK's
// core, the seam, state and AWS packages without a client are not.
func TestPluginDepProblemsFindsControllersAndSDK(t *testing.T) {
	linked := []string{
		"github.com/aws/aws-sdk-go-v2/aws",
		"github.com/aws/aws-sdk-go-v2/service/ec2",
		"github.com/aws/aws-sdk-go-v2/service/sqs/types",
		module + "/autoscaler/cloudprovider",
		module + "/autoscaler/state/clusterstate",
		module + "/autoscaler/aws/capacity",
		module + "/autoscaler/controllers/disruption",
		module + "/autoscaler/aws/controllers/interruption",
		module + "/autoscaler/controllersx",
	}
	got := pluginDepProblems(linked)
	want := []string{linked[1], linked[2], linked[6], linked[7]}
	if !slices.Equal(got, want) {
		t.Errorf("pluginDepProblems = %q, want %q", got, want)
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
