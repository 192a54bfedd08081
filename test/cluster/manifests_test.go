package cluster

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// componentDirs are the kustomizations users apply.
var componentDirs = []string{"controller", "webhook"}

func manifestsDir(t *testing.T) string {
	t.Helper()
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(filepath.Dir(bin), "manifests")
}

// build runs kustomize on manifests/DIR, as `kubectl apply -k` does, and
// returns the objects of the kinds client-go knows.
func build(t *testing.T, dir string) []runtime.Object {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(manifestsDir(t), dir))
	if err != nil {
		t.Fatalf("kustomize build manifests/%s: %v", dir, err)
	}
	var objs []runtime.Object
	for _, r := range resMap.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
		if err != nil {
			continue // CRD-typed or admission objects: not checked here
		}
		objs = append(objs, obj)
	}
	return objs
}

// releaseTag is a semver release tag: no latest, no digests-only, no
// floating major.minor.
var releaseTag = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// TestDeploymentsHardened checks each Deployment that `kubectl apply -k`
// produces: versioned ghcr.io/karpx images, and pods that would pass the
// "restricted" Pod Security Standard with requests set.
func TestDeploymentsHardened(t *testing.T) {
	for _, dir := range componentDirs {
		var found int
		for _, obj := range build(t, dir) {
			d, ok := obj.(*appsv1.Deployment)
			if !ok {
				continue
			}
			found++
			for _, problem := range deploymentProblems(d) {
				t.Errorf("manifests/%s: Deployment %s: %s", dir, d.Name, problem)
			}
		}
		if found == 0 {
			t.Errorf("manifests/%s: no Deployment", dir)
		}
	}
}

// deploymentProblems lists what d lacks of TestDeploymentsHardened's rules.
func deploymentProblems(d *appsv1.Deployment) []string {
	var problems []string
	pod := d.Spec.Template.Spec
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	for _, c := range pod.Containers {
		repo, tag, _ := strings.Cut(c.Image, ":")
		if !strings.HasPrefix(repo, "ghcr.io/karpx/") || !releaseTag.MatchString(tag) {
			problems = append(problems, c.Name+": image "+c.Image+" is not ghcr.io/karpx/NAME:vX.Y.Z")
		}
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		if !isTrue(sc.RunAsNonRoot) && !isTrue(psc.RunAsNonRoot) {
			problems = append(problems, c.Name+": runAsNonRoot not set")
		}
		if (sc.RunAsUser != nil && *sc.RunAsUser == 0) || (psc.RunAsUser != nil && *psc.RunAsUser == 0) {
			problems = append(problems, c.Name+": runs as UID 0")
		}
		if !isTrue(sc.ReadOnlyRootFilesystem) {
			problems = append(problems, c.Name+": readOnlyRootFilesystem not set")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			problems = append(problems, c.Name+": allowPrivilegeEscalation not false")
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			problems = append(problems, c.Name+": capabilities not drop [ALL]")
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = psc.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			problems = append(problems, c.Name+": seccomp profile not RuntimeDefault")
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			problems = append(problems, c.Name+": CPU and memory requests not set")
		}
	}
	return problems
}

func isTrue(b *bool) bool { return b != nil && *b }

// TestDeploymentRulesFail is TestDeploymentsHardened's control: a
// Deployment with a latest image and no security context fails every rule.
func TestDeploymentRulesFail(t *testing.T) {
	d := &appsv1.Deployment{}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "ghcr.io/karpx/karpx-controller:latest"}}
	if got := len(deploymentProblems(d)); got != 7 {
		t.Errorf("bare Deployment: %d problems, want 7: %v", got, deploymentProblems(d))
	}
}

// TestRBACLeastPrivilege fails on wildcard verbs, resources or API groups,
// and on Secret access granted cluster-wide (a ClusterRole with secrets,
// whatever binds it), in every component's RBAC.
func TestRBACLeastPrivilege(t *testing.T) {
	for _, dir := range componentDirs {
		objs, err := LoadRBAC(filepath.Join(manifestsDir(t), dir))
		if err != nil {
			t.Fatal(err)
		}
		var roles int
		for _, obj := range objs {
			switch r := obj.(type) {
			case *rbacv1.ClusterRole:
				roles++
				for _, p := range ruleProblems(r.Rules, true) {
					t.Errorf("manifests/%s: ClusterRole %s: %s", dir, r.Name, p)
				}
				if r.AggregationRule != nil {
					t.Errorf("manifests/%s: ClusterRole %s aggregates other roles", dir, r.Name)
				}
			case *rbacv1.Role:
				roles++
				for _, p := range ruleProblems(r.Rules, false) {
					t.Errorf("manifests/%s: Role %s/%s: %s", dir, r.Namespace, r.Name, p)
				}
			}
		}
		if roles == 0 {
			t.Errorf("manifests/%s: no Role or ClusterRole", dir)
		}
	}
}

// ruleProblems lists wildcards in rules and, when clusterWide, any rule on
// Secrets.
func ruleProblems(rules []rbacv1.PolicyRule, clusterWide bool) []string {
	var problems []string
	for i, r := range rules {
		for field, values := range map[string][]string{"verbs": r.Verbs, "resources": r.Resources, "apiGroups": r.APIGroups} {
			for _, v := range values {
				if v == rbacv1.VerbAll || strings.Contains(v, "*") {
					problems = append(problems, "rule "+strconv.Itoa(i)+": wildcard in "+field)
				}
			}
		}
		// The one non-resource rule allowed: get on /metrics, what
		// ClusterRole karpx-metrics-reader grants a scraper of the
		// authenticated metrics servers (bound to no component).
		if len(r.NonResourceURLs) > 0 && !(slices.Equal(r.NonResourceURLs, []string{"/metrics"}) && slices.Equal(r.Verbs, []string{"get"})) {
			problems = append(problems, "rule "+strconv.Itoa(i)+": non-resource URLs other than get /metrics")
		}
		if clusterWide && slices.Contains(r.APIGroups, "") && slices.ContainsFunc(r.Resources, func(s string) bool {
			return s == "secrets" || strings.HasPrefix(s, "secrets/")
		}) {
			problems = append(problems, "rule "+strconv.Itoa(i)+": Secrets in every namespace (use a namespaced Role)")
		}
	}
	return problems
}

// TestRBACRulesFail is TestRBACLeastPrivilege's control.
func TestRBACRulesFail(t *testing.T) {
	for name, rule := range map[string]rbacv1.PolicyRule{
		"verbs":       {APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"*"}},
		"resources":   {APIGroups: []string{"karpenter.sh"}, Resources: []string{"*"}, Verbs: []string{"get"}},
		"groups":      {APIGroups: []string{"*"}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		"secrets":     {APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
		"nonresource": {NonResourceURLs: []string{"/metrics", "/debug/pprof/*"}, Verbs: []string{"get"}},
		"metricsverb": {NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get", "post"}},
	} {
		if len(ruleProblems([]rbacv1.PolicyRule{rule}, true)) == 0 {
			t.Errorf("%s: %+v accepted cluster-wide", name, rule)
		}
	}
	if p := ruleProblems([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}, false); len(p) != 0 {
		t.Errorf("namespaced Secret access rejected: %v", p)
	}
	if p := ruleProblems([]rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, true); len(p) != 0 {
		t.Errorf("get /metrics (karpx-metrics-reader) rejected: %v", p)
	}
}
