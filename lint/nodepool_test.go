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
