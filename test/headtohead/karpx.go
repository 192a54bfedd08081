package headtohead

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/ec2sim"
	"github.com/karpx/karpx/test/cluster"
	"github.com/karpx/karpx/test/upstream"
)

// Autoscaler is one side of the comparison: how to install it on a fresh
// control plane, which node class its NodePools reference, and how to run
// (and restart) its controller as a process under its own identity.
type Autoscaler interface {
	// Name is the column heading ("karpx", "Karpenter").
	Name() string
	// User is the API server user the controller runs as (its
	// ServiceAccount), whose requests the audit log records.
	User() string
	// Install installs the CRDs, the node class and whatever else the
	// controller needs on c, with the simulated boot delay bootDelay;
	// work files go under dir.
	Install(ctx context.Context, tb testing.TB, c *cluster.Cluster, dir string, bootDelay time.Duration)
	// NodeClassRef is the nodeClassRef of every NodePool.
	NodeClassRef() karpv1.NodeClassReference
	// Start starts the controller process and returns once it runs; the
	// test's cleanup stops it.
	Start(tb testing.TB) Controller
}

// Controller is a running controller process.
type Controller interface {
	// PID is its process id, for /proc/PID.
	PID() int
	// Kill SIGKILLs it and waits until it is gone.
	Kill()
}

// Karpx is the karpx side: bin/karpx-controller (make build) as
// ServiceAccount karpx/karpx with the RBAC of manifests/controller,
// against the EC2 simulator (in the test process, joining its instances
// as Nodes after Config.BootDelay).
type Karpx struct {
	// Root is the repository root (manifests/, bin/).
	Root string
	// Flags are more karpx-controller flags, passed after the harness's
	// own (a later flag wins); nil runs the controller's defaults.
	Flags []string

	cluster    *cluster.Cluster
	dir        string
	sim        *ec2sim.Simulator
	endpoint   string
	kubeconfig string
}

// simAMIAlias is both AWS sides' EC2NodeClass AMI alias: AL2023, whose
// SSM parameters and EKS DescribeCluster ec2sim serves.
const simAMIAlias = "al2023@latest"

// Simulated is a side whose instances an ec2sim launches; its records
// give the launch steps of each NodeClaim (Decompose).
type Simulated interface {
	// Simulator is the side's own ec2sim, running for the whole run.
	Simulator() *ec2sim.Simulator
}

// Simulator implements Simulated: the side's own ec2sim.
func (k *Karpx) Simulator() *ec2sim.Simulator { return k.sim }

// controllerUser is the karpx controller's ServiceAccount as the API
// server names it (manifests/controller).
const controllerUser = "system:serviceaccount:karpx:karpx"

// Name implements Autoscaler.
func (k *Karpx) Name() string { return "karpx" }

// User implements Autoscaler.
func (k *Karpx) User() string { return controllerUser }

// NodeClassRef implements Autoscaler: the EC2NodeClass "default".
func (k *Karpx) NodeClassRef() karpv1.NodeClassReference {
	return karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
}

// simPendingDelay is ec2sim's default time from launch to "running".
const simPendingDelay = 200 * time.Millisecond

// SimConfig is the simulator's configuration on every side: karpx's and
// the AWS provider's own ec2sim each serve it (the same zones, prices,
// throttling buckets and delays: ec2sim's defaults but for the delays),
// and the kwok provider's instance-types file and KWOKNodeClass are
// derived from it. bootDelay is the whole simulated boot, launch to Node
// registered: 200 ms pending, then BootDelay. It must be longer than
// 200 ms.
func SimConfig(clusterName string, bootDelay time.Duration) ec2sim.Config {
	return ec2sim.Config{ClusterName: clusterName, PendingDelay: simPendingDelay, BootDelay: bootDelay - simPendingDelay}
}

// Install implements Autoscaler: manifests/crds, the simulator
// (SimConfig, started by upstream.StartSimForTest as the AWS provider's
// side starts its own), the EC2NodeClass "default"
// (upstream.EC2NodeClassYAML) and a kubeconfig for ServiceAccount
// karpx/karpx.
func (k *Karpx) Install(ctx context.Context, tb testing.TB, c *cluster.Cluster, dir string, bootDelay time.Duration) {
	tb.Helper()
	k.cluster, k.dir = c, dir
	if err := c.InstallCRDs(ctx, filepath.Join(k.Root, "manifests", "crds")); err != nil {
		tb.Fatalf("installing CRDs: %v", err)
	}
	kube, err := client.New(c.RESTConfig, client.Options{Scheme: scheme.New()})
	if err != nil {
		tb.Fatal(err)
	}
	simCfg := SimConfig(c.Name, bootDelay)
	simCfg.Kube = kube
	k.sim, k.endpoint = upstream.StartSimForTest(tb, c, simCfg)
	if _, err := c.Kubectl(ctx, []byte(upstream.EC2NodeClassYAML("default", c.Name, simAMIAlias)), "apply", "-f", "-"); err != nil {
		tb.Fatalf("applying the EC2NodeClass: %v", err)
	}
	sa := cluster.ServiceAccountForTest(tb, c.RESTConfig, filepath.Join(k.Root, "manifests", "controller"), "karpx", "karpx")
	k.kubeconfig = filepath.Join(dir, "karpx-controller.kubeconfig")
	if err := cluster.WriteKubeconfig(sa, k.kubeconfig); err != nil {
		tb.Fatal(err)
	}
}

// Start implements Autoscaler: $KARPX_PREBUILT_BIN/karpx-controller when
// that is set (a build of the worktree under test), else bin/karpx-controller
// (make build), with its default
// batch window (1 s idle, 10 s at most, Karpenter's defaults) and
// disruption period, without leader election, and then k.Flags.
func (k *Karpx) Start(tb testing.TB) Controller {
	tb.Helper()
	binary := filepath.Join(k.Root, "bin", "karpx-controller")
	if dir := os.Getenv("KARPX_PREBUILT_BIN"); dir != "" {
		binary = filepath.Join(dir, "karpx-controller")
	}
	tb.Logf("karpx: controller %s, log %s", binary, filepath.Join(k.dir, "karpx-controller.log"))
	args := []string{
		"--kubeconfig=" + k.kubeconfig,
		"--cluster-name=" + k.cluster.Name,
		"--cluster-endpoint=" + k.cluster.RESTConfig.Host,
		"--region=us-east-1",
		"--ec2-endpoint=" + k.endpoint,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--leader-elect=false",
	}
	args = append(args, k.Flags...)
	return StartProcess(tb, k.dir, "karpx-controller", binary, args, []string{
		"AWS_ACCESS_KEY_ID=AKIAEXAMPLEKARPXSIM00",
		"AWS_SECRET_ACCESS_KEY=karpx-simulator-secret",
		"AWS_EC2_METADATA_DISABLED=true",
		// The status endpoints (default :8082) off, as metrics and probes:
		// the environment, not a flag, so a karpx-controller built before
		// --status-bind-address existed runs too.
		"STATUS_BIND_ADDRESS=0",
	})
}
