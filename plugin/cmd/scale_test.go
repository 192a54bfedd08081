package cmd

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/plugin/cluster"
	testcluster "github.com/karpx/karpx/test/cluster"
)

var (
	statusScale  = flag.Int("karpx.status-scale", 0, "NodeClaims and Nodes to create for TestStatusScale (0 skips it; make bench-status sets 5000)")
	statusRuns   = flag.Int("karpx.status-runs", 5, "timed runs of each command in TestStatusScale; the median is compared")
	pluginBinary = flag.String("karpx.plugin-binary", "", "kubectl-karpx binary TestStatusScale puts on PATH (default: bin/kubectl-karpx)")
)

// TestStatusScale is the scripted measurement behind `make bench-status`:
// with N NodeClaims and N Nodes in a real API server, `kubectl karpx
// status` must take at most 1.5 times `kubectl get nodeclaims -o json`
// (median of -karpx.status-runs runs each, both through the real kubectl).
// It prints both figures.
func TestStatusScale(t *testing.T) {
	n := *statusScale
	if n == 0 {
		t.Skip("scripted measurement: run with -karpx.status-scale N (make bench-status)")
	}
	c := testcluster.StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	bin, err := testcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRDs(ctx, filepath.Join(filepath.Dir(bin), "manifests", "crds")); err != nil {
		t.Fatal(err)
	}
	plugin := *pluginBinary
	if plugin == "" {
		plugin = filepath.Join(bin, "kubectl-karpx")
	}
	if _, err := os.Stat(plugin); err != nil {
		t.Fatalf("%v: run make build", err)
	}
	pathDir := t.TempDir()
	if err := os.Symlink(plugin, filepath.Join(pathDir, "kubectl-karpx")); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	populate(ctx, t, c.RESTConfig, n)
	t.Logf("created %d NodePools' worth: %d NodeClaims and %d Nodes in %s", 10, n, n, time.Since(start).Round(time.Millisecond))

	timeIt := func(args ...string) time.Duration {
		var runs []time.Duration
		for range *statusRuns {
			cmd := exec.CommandContext(ctx, "kubectl", args...)
			cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "PATH="+pathDir+string(os.PathListSeparator)+os.Getenv("PATH"))
			cmd.Stdout, cmd.Stderr = nil, nil
			begin := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("kubectl %v: %v\n%s", args, err, out)
			}
			runs = append(runs, time.Since(begin))
		}
		slices.Sort(runs)
		return runs[len(runs)/2]
	}
	// One warm-up each: discovery caches are filled for both.
	timeIt("get", "nodeclaims", "-o", "json")
	get := timeIt("get", "nodeclaims", "-o", "json")
	karpx := timeIt("karpx", "status")
	ratio := float64(karpx) / float64(get)
	fmt.Printf("status scale: %d NodeClaims, %d Nodes: kubectl get nodeclaims -o json %s, kubectl karpx status %s (median of %d): %.2fx (target <= 1.5x)\n",
		n, n, get.Round(time.Millisecond), karpx.Round(time.Millisecond), *statusRuns, ratio)
	if ratio > 1.5 {
		t.Errorf("kubectl karpx status took %.2fx kubectl get nodeclaims -o json (%s vs %s), want <= 1.5x", ratio, karpx, get)
	}
}

// populate creates 10 NodePools and n NodeClaims (with status.capacity)
// and n Nodes spread over them, 32 requests in flight.
func populate(ctx context.Context, t *testing.T, admin *rest.Config, n int) {
	t.Helper()
	cfg := rest.CopyConfig(admin)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: cluster.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ref := &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	reqs := []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
	for p := range 10 {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pool-%d", p)}}
		np.Spec.Template.Spec.NodeClassRef = ref
		np.Spec.Template.Spec.Requirements = reqs
		if err := c.Create(ctx, np); err != nil {
			t.Fatal(err)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error { return createPair(gctx, c, i, ref, reqs) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

func createPair(ctx context.Context, c client.Client, i int, ref *karpv1.NodeClassReference, reqs []karpv1.NodeSelectorRequirementWithMinValues) error {
	pool := fmt.Sprintf("pool-%d", i%10)
	name := fmt.Sprintf("%s-%05d", pool, i)
	providerID := fmt.Sprintf("aws:///us-east-1a/i-%017x", i)
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: pool}}}
	nc.Spec.NodeClassRef = ref
	nc.Spec.Requirements = reqs
	if err := c.Create(ctx, nc); err != nil {
		return err
	}
	nc.Status.ProviderID = providerID
	nc.Status.NodeName = name
	nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}
	nc.Status.Conditions = []status.Condition{{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, nc); err != nil {
		return err
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: pool, corev1.LabelInstanceTypeStable: "m5.xlarge"}},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
	}
	return c.Create(ctx, node)
}
