package upstream

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/karpx/karpx/test/cluster"
)

// TestAWSVersionIsToolModule: AWSVersion, which CheckAWSBinary holds
// bin/karpenter-aws to and StartAWSForTest takes the CRDs and chart of,
// is the version hack/karpenter-aws/go.mod pins; CheckAWSBinary refuses
// another program and names the fix for a missing binary.
func TestAWSVersionIsToolModule(t *testing.T) {
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(bin), "hack", "karpenter-aws", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^(?:require)?\s*` + regexp.QuoteMeta(AWSModulePath) + `\s+(v\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("hack/karpenter-aws/go.mod does not require %s", AWSModulePath)
	}
	if AWSVersion != string(m[1]) {
		t.Errorf("AWSVersion = %q; hack/karpenter-aws/go.mod pins %s: update AWSVersion in aws.go", AWSVersion, m[1])
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckAWSBinary(self); err == nil || !strings.Contains(err.Error(), "not "+AWSPackage) || !strings.Contains(err.Error(), "make karpenter-aws") {
		t.Errorf("CheckAWSBinary(the test binary) = %v, want it refused as not %s, naming make karpenter-aws", err, AWSPackage)
	}
	if err := CheckAWSBinary(filepath.Join(t.TempDir(), AWSBinaryName)); err == nil || !strings.Contains(err.Error(), "make karpenter-aws") {
		t.Errorf("CheckAWSBinary(missing) = %v, want the fix named", err)
	}
}

// TestAWSRBACManifests renders the AWS provider's chart from its module:
// only RBAC kinds come out, among them the ServiceAccount the controller
// runs as, bound to a ClusterRole that lets it create NodeClaims and
// update EC2NodeClass status, and nothing grants everything. It reads the
// module `make karpenter-aws` puts in the module cache, so it does not run
// with -short.
func TestAWSRBACManifests(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the AWS provider module from make karpenter-aws; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mod, err := AWSModuleDir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data, err := AWSRBACManifests(mod, "test-cluster")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rbac.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := cluster.LoadRBAC(dir)
	if err != nil {
		t.Fatal(err)
	}
	if docs := strings.Count(string(data), "\n---\n") + 1; len(objs) != docs {
		t.Fatalf("%d documents, %d of them RBAC kinds:\n%s", docs, len(objs), data)
	}
	granted := func(group, resource, verb string) bool {
		return slices.ContainsFunc(objs, func(o runtime.Object) bool {
			cr, ok := o.(*rbacv1.ClusterRole)
			return ok && slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool {
				return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb)
			})
		})
	}
	if !granted("karpenter.sh", "nodeclaims", "create") || !granted("karpenter.k8s.aws", "ec2nodeclasses/status", "patch") {
		t.Errorf("the chart's ClusterRoles do not let the controller create NodeClaims and patch EC2NodeClass status:\n%s", data)
	}
	for _, o := range objs {
		if cr, ok := o.(*rbacv1.ClusterRole); ok && slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Verbs, "*") }) {
			t.Errorf("ClusterRole %s grants every verb", cr.Name)
		}
	}
	if !slices.ContainsFunc(objs, func(o runtime.Object) bool {
		b, ok := o.(*rbacv1.ClusterRoleBinding)
		return ok && slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Namespace == AWSNamespace && s.Name == AWSServiceAccount
		})
	}) {
		t.Errorf("no ClusterRoleBinding binds ServiceAccount %s/%s", AWSNamespace, AWSServiceAccount)
	}
	if _, err := AWSRBACManifests(t.TempDir(), "test-cluster"); err == nil || !strings.Contains(err.Error(), "loading chart") {
		t.Errorf("AWSRBACManifests(no chart) = %v, want the loader's error", err)
	}
}

// TestEscapeModulePath: upper-case letters become '!' and their lower
// case, as the module cache names directories; the rest is unchanged.
func TestEscapeModulePath(t *testing.T) {
	for in, want := range map[string]string{
		AWSModulePath:                  AWSModulePath,
		"github.com/BurntSushi/toml":   "github.com/!burnt!sushi/toml",
		"github.com/Azure/go-ansiterm": "github.com/!azure/go-ansiterm",
	} {
		if got := escapeModulePath(in); got != want {
			t.Errorf("escapeModulePath(%q) = %q, want %q", in, got, want)
		}
	}
}
