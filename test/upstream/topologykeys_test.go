package upstream

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/ec2sim"
	"github.com/karpx/karpx/test/cluster"
)

// TestUpstreamTopologyKeys is the differential control of karpx's
// TestTopologyKeys (test/e2e/topologykeys_test.go): the same NodePools
// (instance families c5, m5, r5; custom key example.com/rack r1, r2, r3;
// template label topo=<scenario>, one per scenario) and the same workloads on upstream Karpenter's
// kwok provider, with the instance-family label carried on its instance
// types (RequirementLabels). It asserts the outcomes karpx's test asserts:
// the namespaceSelector anti-affinity pod runs on another node than the
// pod it selects by namespace label, and a 3-replica Deployment spread
// (DoNotSchedule, maxSkew 1) on instance-family, then on the rack key,
// runs one pod per family, then per rack.
func TestUpstreamTopologyKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real control plane; skipped with -short")
	}
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, BinaryName)); err != nil {
		t.Skipf("%s not found in %s: run `make karpenter-kwok` (or `make test`, which builds it)", BinaryName, bin)
	}
	c := cluster.StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	kube, err := client.New(c.RESTConfig, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	delay, err := RegistrationDelay(ec2sim.Config{BootDelay: 800 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e := &upstreamEnv{t: t, ctx: ctx, root: filepath.Dir(bin), cluster: c, kube: kube, delay: delay}

	pools := map[string]*karpv1.NodePool{}
	for _, scenario := range []string{"ns", "family", "rack"} {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "topo-" + scenario}}
		np.Spec.Template.Labels = map[string]string{"topo": scenario}
		np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
			{Key: "karpenter.k8s.aws/instance-family", Operator: corev1.NodeSelectorOpIn, Values: []string{"c5", "m5", "r5"}},
			{Key: "example.com/rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"r1", "r2", "r3"}},
		}
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		pools[scenario] = np
	}
	types := filepath.Join(t.TempDir(), "instance-types.json")
	if err := WriteInstanceTypes(types, ec2sim.Config{}, RequirementLabels(pools["ns"])...); err != nil {
		t.Fatal(err)
	}
	k := StartForTest(t, c, Options{InstanceTypesFile: types})
	t.Logf("Karpenter log: %s", k.LogPath)
	for _, np := range pools {
		if _, err := ApplyNodePool(ctx, kube, np, delay); err != nil {
			t.Fatal(err)
		}
	}
	topo := map[string]string{"topo": "ns"}

	// namespaceSelector anti-affinity.
	if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "storage", Labels: map[string]string{"tier": "storage"}}}); err != nil {
		t.Fatal(err)
	}
	db := deployment("db", 1, "250m", topo)
	db.Namespace = "storage"
	if err := kube.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	dbNodes := e.runningNodes("storage", "db", 1, "")
	api := deployment("api", 1, "250m", topo)
	api.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey:       corev1.LabelHostname,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "storage"}},
		}},
	}}
	if err := kube.Create(ctx, api); err != nil {
		t.Fatal(err)
	}
	apiNodes := e.runningNodes("default", "api", 1, "")
	if apiNodes[0] == dbNodes[0] {
		t.Errorf("Karpenter: api runs on db's node %s despite its anti-affinity", apiNodes[0])
	}
	t.Logf("Karpenter: namespaceSelector anti-affinity: db on %s, api on %s", dbNodes[0], apiNodes[0])

	for _, tc := range []struct {
		app, key string
		want     []string
	}{
		{"family", "karpenter.k8s.aws/instance-family", []string{"c5", "m5", "r5"}},
		{"rack", "example.com/rack", []string{"r1", "r2", "r3"}},
	} {
		// 1500m: one pod per node of the smallest size (2 vCPUs).
		d := deployment(tc.app, 3, "1500m", map[string]string{"topo": tc.app})
		d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: tc.key, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": tc.app}},
		}}
		if err := kube.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		got := e.runningNodes("default", tc.app, 3, tc.key)
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Karpenter: nodes' %s of the 3 %s pods = %v, want one each of %v", tc.key, tc.app, got, tc.want)
		}
		t.Logf("Karpenter: spread on %s put the 3 pods on nodes with %v", tc.key, got)
	}
}

// runningNodes waits up to 3 minutes until n pods of app in namespace run
// and returns, per pod, its Node's name (key "") or its Node's label key.
func (e *upstreamEnv) runningNodes(namespace, app string, n int, key string) []string {
	var out []string
	e.eventually(3*time.Minute, app+" pods Running", func(ctx context.Context) (bool, error) {
		out = nil
		var pods corev1.PodList
		if err := e.kube.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"app": app}); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning {
				continue
			}
			if key == "" {
				out = append(out, p.Spec.NodeName)
				continue
			}
			var node corev1.Node
			if err := e.kube.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node); err != nil {
				return false, err
			}
			out = append(out, node.Labels[key])
		}
		return len(out) == n, nil
	})
	return out
}
