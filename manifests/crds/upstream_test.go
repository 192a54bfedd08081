package crds_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpx/karpx/manifests/crds"
)

// upstreamModule is the Karpenter AWS provider release whose CRDs karpx
// matches (the Makefile's KARPENTER_CRD_MODULE; `make unit` and `make test`
// download it first). Its pkg/apis/crds holds the CRDs its karpenter-crd
// chart installs: EC2NodeClass, and Karpenter's NodePool, NodeClaim and
// NodeOverlay with the provider's karpenter.k8s.aws label rules (and
// autoscaling.x-k8s.io's CapacityBuffer, which karpx does not ship).
const (
	upstreamModule  = "github.com/aws/karpenter-provider-aws"
	upstreamVersion = "v1.14.0"
)

// upstreamCRDDir returns pkg/apis/crds of upstreamModule@upstreamVersion in
// the module cache, or skips the test naming the command that fills it.
func upstreamCRDDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	esc, err := module.EscapePath(upstreamModule)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), esc+"@"+upstreamVersion, "pkg", "apis", "crds")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("%s@%s is not in the module cache (%v): run `make upstream-crds` (go mod download %s@%s)", upstreamModule, upstreamVersion, err, upstreamModule, upstreamVersion)
	}
	return dir
}

// schemaFacts is what a walk of one CRD version's schema finds: every
// property path ("spec.networkInterfaces[].deviceIndex", map values as
// "{}"), each path's CEL rules (rule text → message) and enum values.
type schemaFacts struct {
	props map[string]bool
	rules map[string]map[string]string
	enums map[string][]string
}

func walkSchema(s *apiextensionsv1.JSONSchemaProps, path string, f *schemaFacts) {
	for _, v := range s.XValidations {
		if f.rules[path] == nil {
			f.rules[path] = map[string]string{}
		}
		f.rules[path][v.Rule] = v.Message
	}
	for _, e := range s.Enum {
		f.enums[path] = append(f.enums[path], string(e.Raw))
	}
	for name, p := range s.Properties {
		child := name
		if path != "" {
			child = path + "." + name
		}
		f.props[child] = true
		walkSchema(&p, child, f)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkSchema(s.Items.Schema, path+"[]", f)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walkSchema(s.AdditionalProperties.Schema, path+"{}", f)
	}
}

// facts walks every served version of crd, keyed by version name.
func facts(crd *apiextensionsv1.CustomResourceDefinition) map[string]*schemaFacts {
	out := map[string]*schemaFacts{}
	for _, v := range crd.Spec.Versions {
		if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		f := &schemaFacts{props: map[string]bool{}, rules: map[string]map[string]string{}, enums: map[string][]string{}}
		walkSchema(v.Schema.OpenAPIV3Schema, "", f)
		out[v.Name] = f
	}
	return out
}

// compare returns what upstream has that karpx lacks (properties, CEL
// rules, enum values: karpx would reject or prune what Karpenter accepts)
// and what karpx has that upstream lacks among properties and enum values
// (karpx would accept what Karpenter rejects). extraRules are karpx's CEL
// rules upstream lacks (stricter than Karpenter), reported apart.
func compare(up, kx *schemaFacts) (problems, extraRules []string) {
	for p := range up.props {
		if !kx.props[p] {
			problems = append(problems, "missing property "+p)
		}
	}
	for p := range kx.props {
		if !up.props[p] {
			problems = append(problems, "property upstream does not have: "+p)
		}
	}
	for path, rs := range up.rules {
		for rule, msg := range rs {
			got, ok := kx.rules[path][rule]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("missing CEL rule at %q: %s (message %q)", path, rule, msg))
			case got != msg:
				problems = append(problems, fmt.Sprintf("CEL rule at %q has message %q, upstream %q", path, got, msg))
			}
		}
	}
	for path, rs := range kx.rules {
		for rule := range rs {
			if _, ok := up.rules[path][rule]; !ok {
				extraRules = append(extraRules, fmt.Sprintf("%q: %s", path, rule))
			}
		}
	}
	for path, vals := range up.enums {
		for _, v := range vals {
			if !slices.Contains(kx.enums[path], v) {
				problems = append(problems, fmt.Sprintf("enum of %q lacks %s", path, v))
			}
		}
	}
	for path, vals := range kx.enums {
		for _, v := range vals {
			if !slices.Contains(up.enums[path], v) {
				problems = append(problems, fmt.Sprintf("enum of %q has %s, which upstream does not", path, v))
			}
		}
	}
	sort.Strings(problems)
	sort.Strings(extraRules)
	return problems, extraRules
}

// TestMatchesUpstream compares each CRD karpx ships with the same CRD of
// upstreamModule@upstreamVersion, read from the module cache at test time:
// every property, CEL rule (rule and message) and enum value of upstream's
// schema must be in karpx's, and karpx's may have no property or enum value
// upstream lacks. CEL rules only karpx has are logged: they make karpx
// stricter than Karpenter, never laxer.
func TestMatchesUpstream(t *testing.T) {
	dir := upstreamCRDDir(t)
	ours, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(ours) == 0 {
		t.Fatal("manifests/crds holds no CRD")
	}
	for _, kx := range ours {
		t.Run(kx.Spec.Names.Kind, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, kx.Spec.Group+"_"+kx.Spec.Names.Plural+".yaml"))
			if err != nil {
				t.Fatalf("upstream has no such CRD: %v", err)
			}
			up := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.Unmarshal(data, up); err != nil {
				t.Fatal(err)
			}
			upFacts, kxFacts := facts(up), facts(kx)
			if len(upFacts) == 0 {
				t.Fatal("upstream serves no version with a schema")
			}
			for version, uf := range upFacts {
				kf, ok := kxFacts[version]
				if !ok {
					t.Errorf("karpx does not serve version %s", version)
					continue
				}
				problems, extra := compare(uf, kf)
				for _, p := range problems {
					t.Errorf("%s %s: %s", kx.Name, version, p)
				}
				for _, r := range extra {
					t.Logf("%s %s: CEL rule upstream does not have (stricter than Karpenter): %s", kx.Name, version, r)
				}
				t.Logf("%s %s: %d properties and %d CEL rules upstream, all present", kx.Name, version, len(uf.props), countRules(uf))
			}
		})
	}
}

// TestShipsEveryKarpenterCRD: every CRD of upstreamModule@upstreamVersion
// in the karpenter.sh and karpenter.k8s.aws groups is in manifests/crds,
// NodeOverlay included although karpx applies none. The CRDs are templates
// of the karpx-crd chart, so a CRD dropped from it is deleted by `helm
// upgrade`, and with it every object of its kind that users had (moving
// from Karpenter, or from a karpx release that shipped it).
func TestShipsEveryKarpenterCRD(t *testing.T) {
	dir := upstreamCRDDir(t)
	ours, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	shipped := map[string]bool{}
	for _, c := range ours {
		shipped[c.Name] = true
	}
	upstream, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range upstream {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		group, plural, ok := strings.Cut(name, "_")
		if !ok || (group != "karpenter.sh" && group != "karpenter.k8s.aws") {
			continue
		}
		want = append(want, plural+"."+group)
		if !shipped[plural+"."+group] {
			t.Errorf("manifests/crds lacks %s (upstream %s): a helm upgrade of karpx-crd would delete users' objects of that kind; run make generate", plural+"."+group, filepath.Base(f))
		}
	}
	if !slices.Contains(want, "nodeoverlays.karpenter.sh") {
		t.Fatalf("upstream %s@%s has no NodeOverlay CRD among %v: update this test", upstreamModule, upstreamVersion, want)
	}
	t.Logf("Karpenter CRDs upstream, all shipped: %v", want)
}

func countRules(f *schemaFacts) int {
	n := 0
	for _, rs := range f.rules {
		n += len(rs)
	}
	return n
}

// TestCompareFindsDifferences is compare's control: a schema missing a
// property, a rule, an enum value, or carrying a property of its own, is
// reported; the same schema compared with itself is not.
func TestCompareFindsDifferences(t *testing.T) {
	base := func() *apiextensionsv1.JSONSchemaProps {
		return &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object",
				XValidations: apiextensionsv1.ValidationRules{{Rule: "has(self.a)", Message: "a"}},
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"a": {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"x"`)}, {Raw: []byte(`"y"`)}}},
					"l": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"b": {Type: "integer"}}}}},
				}},
		}}
	}
	walk := func(s *apiextensionsv1.JSONSchemaProps) *schemaFacts {
		f := &schemaFacts{props: map[string]bool{}, rules: map[string]map[string]string{}, enums: map[string][]string{}}
		walkSchema(s, "", f)
		return f
	}
	if p, e := compare(walk(base()), walk(base())); len(p)+len(e) != 0 {
		t.Fatalf("identical schemas: %v %v", p, e)
	}
	kx := base()
	spec := kx.Properties["spec"]
	delete(spec.Properties["l"].Items.Schema.Properties, "b")
	spec.Properties["extra"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	a := spec.Properties["a"]
	a.Enum = a.Enum[:1]
	spec.Properties["a"] = a
	spec.XValidations = apiextensionsv1.ValidationRules{{Rule: "has(self.l)", Message: "l"}}
	kx.Properties["spec"] = spec
	problems, extra := compare(walk(base()), walk(kx))
	got := strings.Join(problems, "\n")
	for _, want := range []string{"missing property spec.l[].b", "property upstream does not have: spec.extra", `missing CEL rule at "spec": has(self.a)`, `enum of "spec.a" lacks "y"`} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if len(extra) != 1 || !strings.Contains(extra[0], "has(self.l)") {
		t.Errorf("extra rules %v", extra)
	}
}
