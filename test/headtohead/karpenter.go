package headtohead

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/test/cluster"
	"github.com/karpx/karpx/test/upstream"
)

// Karpenter is the upstream side: Karpenter's kwok provider
// (bin/karpenter-kwok, make karpenter-kwok) started by test/upstream, with
// the instance-types file generated from karpx's catalogue and ec2sim's
// prices, a KWOKNodeClass whose nodeRegistrationDelay is the simulated
// boot, and ServiceAccount karpenter/karpenter as its identity.
type Karpenter struct {
	cluster    *cluster.Cluster
	dir        string
	itFile     string
	kubeconfig string
	delay      time.Duration
}

// karpenterUser is the identity Karpenter runs as here: a ServiceAccount
// bound to cluster-admin (its Helm chart's ClusterRoles are templates;
// what it may do does not change what it requests).
const karpenterUser = "system:serviceaccount:karpenter:karpenter"

// newKarpenter returns the Karpenter side, or nil (after logging why) when
// bin/karpenter-kwok is missing or stale.
func newKarpenter(t *testing.T, root string) Autoscaler {
	if err := upstream.CheckBinary(filepath.Join(root, "bin", upstream.BinaryName)); err != nil {
		t.Errorf("Karpenter side not run: %v (make karpenter-kwok)", err)
		return nil
	}
	return &Karpenter{}
}

// Name implements Autoscaler.
func (k *Karpenter) Name() string { return "Karpenter kwok" }

// User implements Autoscaler.
func (k *Karpenter) User() string { return karpenterUser }

// NodeClassRef implements Autoscaler: the KWOKNodeClass "default"
// (upstream.Translate of karpx's EC2NodeClass reference).
func (k *Karpenter) NodeClassRef() karpv1.NodeClassReference {
	np, err := upstream.Translate(NodePool((&Karpx{}).NodeClassRef()))
	if err != nil {
		panic(err) // NodePool always has a nodeClassRef name
	}
	return *np.Spec.Template.Spec.NodeClassRef
}

// Install implements Autoscaler: Karpenter's CRDs, the KWOKNodeClass
// "default" with nodeRegistrationDelay from SimConfig, the instance-types
// file from the catalogue with ec2sim's prices, and a kubeconfig for
// ServiceAccount karpenter/karpenter.
func (k *Karpenter) Install(ctx context.Context, tb testing.TB, c *cluster.Cluster, dir string, bootDelay time.Duration) {
	tb.Helper()
	k.cluster, k.dir = c, dir
	if err := upstream.InstallCRDs(ctx, c); err != nil {
		tb.Fatalf("installing Karpenter's CRDs: %v", err)
	}
	sim := SimConfig(c.Name, bootDelay)
	delay, err := upstream.RegistrationDelay(sim)
	if err != nil {
		tb.Fatal(err)
	}
	k.delay = delay
	kube, err := client.New(c.RESTConfig, client.Options{Scheme: upstream.NewScheme()})
	if err != nil {
		tb.Fatal(err)
	}
	nc, err := upstream.NodeClass(k.NodeClassRef().Name, delay)
	if err != nil {
		tb.Fatal(err)
	}
	if err := kube.Create(ctx, nc); err != nil {
		tb.Fatalf("creating KWOKNodeClass: %v", err)
	}
	k.itFile = filepath.Join(dir, "instance-types.json")
	if err := upstream.WriteInstanceTypes(k.itFile, sim, upstream.RequirementLabels(NodePool(k.NodeClassRef()))...); err != nil {
		tb.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "karpenter"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("karpenter").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "karpenter"}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "karpenter-h2h"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "karpenter", Name: "karpenter"}},
	}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	sa, err := cluster.ServiceAccountConfig(ctx, c.RESTConfig, "karpenter", "karpenter", time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	k.kubeconfig = filepath.Join(dir, "karpenter.kubeconfig")
	if err := cluster.WriteKubeconfig(sa, k.kubeconfig); err != nil {
		tb.Fatal(err)
	}
}

// Start implements Autoscaler: upstream.Start with Karpenter's default
// batch window (BATCH_IDLE_DURATION 1s, BATCH_MAX_DURATION 10s), as
// ServiceAccount karpenter/karpenter.
func (k *Karpenter) Start(tb testing.TB) Controller {
	tb.Helper()
	p, err := upstream.Start(context.Background(), k.cluster, upstream.Options{
		Workdir:           k.dir,
		InstanceTypesFile: k.itFile,
		Env:               []string{"KUBECONFIG=" + k.kubeconfig},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		p.Kill()
		if tb.Failed() {
			tb.Logf("karpenter-kwok log (last 8 KiB):\n%s", p.LogTail(8<<10))
		}
	})
	return p
}
