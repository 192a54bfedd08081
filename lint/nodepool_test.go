package lint

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/yaml"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func nodePool(t *testing.T, spec string) *karpv1.NodePool {
	t.Helper()
	np := &karpv1.NodePool{}
	doc := "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: np\nspec:\n" + spec
	if err := yaml.NewYAMLOrJSONDecoder(strings.NewReader(doc), 4096).Decode(np); err != nil {
		t.Fatal(err)
	}
	return np
}

const ref = `  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`

func TestCheckNodePool(t *testing.T) {
	exists := func(_ context.Context, name string) (bool, error) { return name == "default", nil }
	cases := []struct {
		name, spec string
		lookup     NodeClassLookup
		want       []string
	}{
		{"ok", ref + "      requirements:\n      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}\n      - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}\n", exists, nil},
		{"missing class", strings.Replace(ref, "name: default", "name: nope", 1), exists, []string{"KX101@0"}},
		{"lookup error is silent", strings.Replace(ref, "name: default", "name: nope", 1), func(context.Context, string) (bool, error) { return false, errors.New("boom") }, nil},
		{"versioned group", strings.Replace(ref, "group: karpenter.k8s.aws", "group: karpenter.k8s.aws/v1", 1), exists, []string{"KX105@0"}},
		{"unsatisfiable", ref + "      requirements:\n      - {key: kubernetes.io/arch, operator: In, values: [arm64]}\n      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}\n", exists, []string{"KX102@0"}},
		{"typo instance type", ref + "      requirements:\n      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.larg]}\n", exists, []string{"KX102@0"}},
		{"gt too big", ref + "      requirements:\n      - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ['100000']}\n", exists, []string{"KX102@0"}},
		{"gt not an integer", ref + "      requirements:\n      - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: [four]}\n", exists, []string{"KX102@0"}},
		{"gte lte window", ref + "      requirements:\n      - {key: karpenter.k8s.aws/instance-cpu, operator: Gte, values: ['4']}\n      - {key: karpenter.k8s.aws/instance-cpu, operator: Lte, values: ['4']}\n", exists, nil},
		{"gt lt window empty", ref + "      requirements:\n      - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ['4']}\n      - {key: karpenter.k8s.aws/instance-cpu, operator: Lt, values: ['5']}\n", exists, []string{"KX102@0"}},
		{"gpu DoesNotExist", ref + "      requirements:\n      - {key: karpenter.k8s.aws/instance-gpu-count, operator: DoesNotExist}\n", exists, nil},
		{"gpu Exists then DoesNotExist", ref + "      requirements:\n      - {key: karpenter.k8s.aws/instance-gpu-count, operator: Exists}\n      - {key: karpenter.k8s.aws/instance-gpu-count, operator: DoesNotExist}\n", exists, []string{"KX102@0"}},
		{"unknown operator left to the CRD", ref + "      requirements:\n      - {key: karpenter.k8s.aws/instance-cpu, operator: Near, values: ['4']}\n", exists, nil},
		{"windows os ignored", ref + "      requirements:\n      - {key: kubernetes.io/os, operator: In, values: [windows]}\n", exists, nil},
		{"minValues", ref + "      requirements:\n      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5], minValues: 3}\n", exists, []string{"KX103@0"}},
		{"bad schedule", ref + "  disruption:\n    budgets:\n    - {nodes: '0', schedule: '61 * * * *', duration: 1h}\n", exists, []string{"KX104@0"}},
		{"good schedule", ref + "  disruption:\n    budgets:\n    - {nodes: '0', schedule: '@daily', duration: 1h}\n    - {nodes: '0', schedule: '0 9 * * mon-fri', duration: 8h}\n", exists, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := CheckNodePool(context.Background(), nodePool(t, c.spec), c.lookup)
			if g := got(fs); strings.Join(g, ",") != strings.Join(c.want, ",") {
				for _, f := range fs {
					t.Logf("  %s", f)
				}
				t.Fatalf("got %v, want %v", g, c.want)
			}
			for _, f := range fs {
				if f.Kind != "NodePool" || f.Name != "np" || f.Fix == "" {
					t.Errorf("incomplete finding %+v", f)
				}
			}
		})
	}
}

// TestCheckRequirementsNamesTheEmptyingRequirement: KX102 points at the
// requirement that leaves no type, after the earlier ones narrowed the
// catalogue, and describes it as written.
func TestCheckRequirementsNamesTheEmptyingRequirement(t *testing.T) {
	np := nodePool(t, ref+"      requirements:\n      - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ['4']}\n      - {key: karpenter.k8s.aws/instance-cpu, operator: Lt, values: ['5']}\n")
	fs := CheckNodePool(context.Background(), np, func(context.Context, string) (bool, error) { return true, nil })
	if len(fs) != 1 {
		t.Fatalf("findings %v, want one KX102", fs)
	}
	f := fs[0]
	if f.RuleID != RuleRequirementsUnsatisfiable || f.Field != "spec.template.spec.requirements[1]" ||
		!strings.HasPrefix(f.Message, "karpenter.k8s.aws/instance-cpu Lt 5 leaves none of the ") {
		t.Errorf("finding %+v, want KX102 on requirements[1] naming \"karpenter.k8s.aws/instance-cpu Lt 5\"", f)
	}
}
