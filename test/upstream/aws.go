package upstream

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/karpx/karpx/charts"
	"github.com/karpx/karpx/ec2sim"
	"github.com/karpx/karpx/test/cluster"
)

// AWSModulePath is the Go module of the real Karpenter AWS provider, whose
// controller (AWSPackage) bin/karpenter-aws is built from by `make
// karpenter-aws`, in a module of its own (hack/karpenter-aws): karpx's
// go.mod requires Karpenter core v1.13 for the kwok provider, the AWS
// provider its own core version.
const AWSModulePath = "github.com/aws/karpenter-provider-aws"

// AWSPackage is the main package of the AWS provider's controller.
const AWSPackage = AWSModulePath + "/cmd/controller"

// AWSBinaryName is the file name of the AWS provider's controller in the
// repository's bin/, written by `make karpenter-aws`.
const AWSBinaryName = "karpenter-aws"

// AWSVersion is the version of AWSModulePath that hack/karpenter-aws/go.mod
// pins, which `make karpenter-aws` builds and whose CRDs and chart
// StartAWSForTest installs. A test binary carries no version of a module
// it does not link, so it is written here; TestAWSVersionIsToolModule fails
// when it and hack/karpenter-aws/go.mod differ.
const AWSVersion = "v1.14.3"

// AWSCRDDir is the directory of the AWS provider module holding its CRDs
// (NodePool, NodeClaim, NodeOverlay, EC2NodeClass, CapacityBuffer), the
// ones its Helm chart karpenter-crd ships.
const AWSCRDDir = "pkg/apis/crds"

// AWSChartDir is the directory of the AWS provider module holding its Helm
// chart, whose Roles, ClusterRoles, bindings and ServiceAccount
// AWSRBACManifests renders.
const AWSChartDir = "charts/karpenter"

// AWSNamespace and AWSServiceAccount are where StartAWSForTest installs the
// chart's RBAC and whom the controller runs as: the chart's ServiceAccount
// for release "karpenter" in kube-system, the namespace Karpenter's
// getting-started guide installs into (KARPENTER_NAMESPACE=kube-system).
const (
	AWSNamespace      = "kube-system"
	AWSServiceAccount = "karpenter"
)

// AWSRegion is the region the controller is told it runs in
// (AWS_REGION): ec2sim's default region.
const AWSRegion = "us-east-1"

// CheckAWSBinary returns an error unless path is the AWS provider's
// controller (AWSPackage) built from AWSModulePath at AWSVersion: missing,
// another program, or another version (a stale bin/ after
// hack/karpenter-aws/go.mod moved). Each error says to run `make
// karpenter-aws`.
func CheckAWSBinary(path string) error {
	return checkBuild(path, AWSPackage, AWSModulePath, AWSVersion, "karpenter-aws")
}

// AWSModuleDir returns the directory of AWSModulePath at AWSVersion in the
// module cache (`go env GOMODCACHE`), where `make karpenter-aws` extracted
// it after checking it against hack/karpenter-aws/go.sum. It does not
// download the module as ModuleDir does: the module needs a newer Go than
// karpx's toolchain (its go.mod says go 1.26.10), so the local go command
// refuses it. It returns an error naming `make karpenter-aws` when the
// directory is missing, or the go command's error.
func AWSModuleDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	cache := strings.TrimSpace(string(out))
	if cache == "" {
		return "", fmt.Errorf("go env GOMODCACHE is empty")
	}
	dir := filepath.Join(cache, filepath.FromSlash(escapeModulePath(AWSModulePath))+"@"+AWSVersion)
	if _, err := os.Stat(filepath.Join(dir, AWSCRDDir)); err != nil {
		return "", fmt.Errorf("%s@%s is not in the module cache: run `make karpenter-aws` (or `make test`, which runs it): %w", AWSModulePath, AWSVersion, err)
	}
	return dir, nil
}

// escapeModulePath escapes a module path as the module cache names its
// directories: every upper-case letter becomes '!' and its lower case
// (golang.org/x/mod/module.EscapePath; "Module cache" in the Go Modules
// Reference).
func escapeModulePath(path string) string {
	var b strings.Builder
	for _, r := range path {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// InstallAWSCRDs server-side applies the CRDs of AWSCRDDir in moduleDir
// (AWSModuleDir) to c and waits until they are established. Applied over
// karpx's (manifests/crds) with the same field manager, they replace them:
// the cluster then serves the schemas the real Karpenter was built with.
func InstallAWSCRDs(ctx context.Context, c *cluster.Cluster, moduleDir string) error {
	if err := c.InstallCRDs(ctx, filepath.Join(moduleDir, AWSCRDDir)); err != nil {
		return fmt.Errorf("installing the AWS provider's CRDs from %s: %w", AWSCRDDir, err)
	}
	return nil
}

// AWSRBACManifests renders the AWS provider's Helm chart (AWSChartDir in
// moduleDir) as `helm template --namespace AWSNamespace karpenter` does,
// with settings.clusterName set to clusterName (the chart requires it), and
// returns its documents of the kinds cluster.RBACKinds (ServiceAccount
// AWSServiceAccount, Roles, ClusterRoles and their bindings) as one
// multi-document YAML. It returns the chart's load or render error, or an
// error when the chart renders no ServiceAccount AWSServiceAccount.
func AWSRBACManifests(moduleDir, clusterName string) ([]byte, error) {
	chart, err := charts.Load(filepath.Join(moduleDir, AWSChartDir))
	if err != nil {
		return nil, err
	}
	values := map[string]any{"settings": map[string]any{"clusterName": clusterName}}
	ms, err := charts.Render(chart, "karpenter", AWSNamespace, values)
	if err != nil {
		return nil, err
	}
	var docs []string
	sa := false
	for _, m := range ms {
		for doc := range strings.SplitSeq(m.YAML, "\n---") {
			var meta struct {
				Kind     string
				Metadata struct{ Name, Namespace string }
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				return nil, fmt.Errorf("chart %s: %s: %w", AWSChartDir, m.Template, err)
			}
			if !slices.Contains(cluster.RBACKinds, meta.Kind) {
				continue
			}
			sa = sa || (meta.Kind == "ServiceAccount" && meta.Metadata.Name == AWSServiceAccount && meta.Metadata.Namespace == AWSNamespace)
			docs = append(docs, strings.TrimSpace(doc))
		}
	}
	if !sa {
		return nil, fmt.Errorf("chart %s renders no ServiceAccount %s/%s; update AWSServiceAccount", AWSChartDir, AWSNamespace, AWSServiceAccount)
	}
	return []byte(strings.Join(docs, "\n---\n") + "\n"), nil
}

// AWSOptions configure StartAWS.
type AWSOptions struct {
	// BinDir holds karpenter-aws. Default: cluster.BinDir().
	BinDir string
	// Workdir receives the log. Default: a new temporary directory,
	// removed by Stop.
	Workdir string
	// Kubeconfig is what the controller authenticates with. Default: the
	// cluster's admin kubeconfig; StartAWSForTest passes the chart's
	// ServiceAccount's.
	Kubeconfig string
	// Endpoint is the URL of the ec2sim serving EC2, SSM, IAM, EKS,
	// Pricing and SQS, e.g. "http://127.0.0.1:PORT". Required.
	Endpoint string
	// ClusterName is CLUSTER_NAME: ec2sim's Config.ClusterName, which
	// its discovery tags and EKS DescribeCluster answer for. Default: the
	// cluster's Name.
	ClusterName string
	// Env are extra environment variables (KEY=value) after, and so
	// overriding, AWSEnv's: e.g. ISOLATED_VPC=true (Karpenter's built-in
	// prices), LOG_LEVEL=debug, BATCH_IDLE_DURATION=1s.
	Env []string
	// Args are extra command-line flags.
	Args []string
	// ReadyTimeout bounds the wait for /readyz. Default 2 minutes.
	ReadyTimeout time.Duration
}

// AWSEnv returns the environment that points the AWS provider's controller
// at cluster endpoint clusterEndpoint (CLUSTER_ENDPOINT) named clusterName
// (CLUSTER_NAME) and at ec2sim's endpoint for every AWS service, besides
// the variables every start sets (KUBECONFIG, SYSTEM_NAMESPACE,
// DISABLE_LEADER_ELECTION, METRICS_PORT, HEALTH_PROBE_PORT):
//
//   - ISOLATED_VPC=false: Karpenter reads on-demand prices from the AWS
//     Pricing API (GetProducts) as in a VPC with internet access, which
//     ec2sim answers from karpx's catalogue; true would make it use its
//     built-in prices (Karpenter settings reference,
//     karpenter.sh/docs/reference/settings).
//   - AWS_REGION, AWS_ENDPOINT_URL: aws-sdk-go-v2 sends every service to
//     the one endpoint (AWS SDKs and Tools Reference Guide, "Service-
//     specific endpoints"; the global variable covers every service).
//   - AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY: dummy static credentials,
//     so the SDK signs requests without any credential provider chain.
//   - AWS_EC2_METADATA_DISABLED=true: no instance metadata service (IMDS)
//     lookups, which would time out off EC2.
func AWSEnv(clusterName, clusterEndpoint, endpoint string) []string {
	return []string{
		"CLUSTER_NAME=" + clusterName,
		"CLUSTER_ENDPOINT=" + clusterEndpoint,
		"ISOLATED_VPC=false",
		"AWS_REGION=" + AWSRegion,
		"AWS_ENDPOINT_URL=" + endpoint,
		"AWS_ACCESS_KEY_ID=AKIAEXAMPLEKARPENTER0",
		"AWS_SECRET_ACCESS_KEY=karpenter-simulator-secret",
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// StartAWS runs bin/karpenter-aws against c and ec2sim (opts.Endpoint) and
// waits until it is ready (/readyz answers 200: caches synced, so the
// CRDs must be installed: InstallAWSCRDs). The environment is AWSEnv's,
// then opts.Env. It returns an error when Endpoint is empty, the binary is
// missing or stale (CheckAWSBinary), or the process exits or is not ready
// within ReadyTimeout; the error carries the end of its log.
func StartAWS(ctx context.Context, c *cluster.Cluster, opts AWSOptions) (*Karpenter, error) {
	if opts.Endpoint == "" {
		return nil, fmt.Errorf("AWSOptions.Endpoint is empty: set it to the ec2sim URL (ec2sim.Simulator.Start's answer)")
	}
	if opts.BinDir == "" {
		dir, err := cluster.BinDir()
		if err != nil {
			return nil, err
		}
		opts.BinDir = dir
	}
	bin := filepath.Join(opts.BinDir, AWSBinaryName)
	if err := CheckAWSBinary(bin); err != nil {
		return nil, err
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 2 * time.Minute
	}
	if opts.Kubeconfig == "" {
		opts.Kubeconfig = c.Kubeconfig
	}
	if opts.ClusterName == "" {
		opts.ClusterName = c.Name
	}
	removeDir := ""
	if opts.Workdir == "" {
		dir, err := os.MkdirTemp("", "karpenter-aws-")
		if err != nil {
			return nil, err
		}
		opts.Workdir, removeDir = dir, dir
	}
	p := process{name: AWSBinaryName, bin: bin, kubeconfig: opts.Kubeconfig, workdir: opts.Workdir, readyTimeout: opts.ReadyTimeout,
		args: opts.Args, env: append(AWSEnv(opts.ClusterName, c.RESTConfig.Host, opts.Endpoint), opts.Env...)}
	k, err := p.start(ctx)
	if err != nil {
		if removeDir != "" {
			_ = os.RemoveAll(removeDir)
		}
		return nil, err
	}
	k.removeDir = removeDir
	return k, nil
}

// EC2NodeClassYAML is an EC2NodeClass named name for cluster clusterName
// whose AMIs, subnets and security groups ec2sim serves: the AMI alias
// (e.g. "al2023@latest", "bottlerocket@latest") resolved through the SSM
// parameters ec2sim serves, and the discovery tags
// (karpenter.sh/discovery: clusterName) ec2sim puts on its subnets and
// security group. Both karpx and the AWS provider accept it.
func EC2NodeClassYAML(name, clusterName, alias string) string {
	return fmt.Sprintf(`apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: %[1]s}
spec:
  role: KarpenterNodeRole-%[2]s
  amiSelectorTerms: [{alias: %[3]s}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: %[2]s}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: %[2]s}}]
`, name, clusterName, alias)
}

// StartSimForTest starts an ec2sim for c on a free loopback port and
// returns it and its endpoint URL ("http://127.0.0.1:PORT"); it stops
// when t ends. cfg's empty ClusterName, ClusterEndpoint and ClusterCA
// become c's (EKS DescribeCluster answers them: the AWS provider derives
// AL2023's cluster CIDR and bootstrap from it), an empty Kube a client of
// c's admin (its kubelet emulation registers Nodes through it) and an
// empty Logger logr.Discard. It fails t on ec2sim.New's validation error
// (naming the field) or when the port cannot be bound. Both the AWS
// provider's tests and the head-to-head (karpx's and the AWS provider's
// side) run their ec2sim through it.
func StartSimForTest(t testing.TB, c *cluster.Cluster, cfg ec2sim.Config) (*ec2sim.Simulator, string) {
	t.Helper()
	if cfg.ClusterName == "" {
		cfg.ClusterName = c.Name
	}
	if cfg.ClusterEndpoint == "" {
		cfg.ClusterEndpoint = c.RESTConfig.Host
	}
	if cfg.ClusterCA == nil {
		cfg.ClusterCA = c.RESTConfig.CAData
	}
	if cfg.Kube == nil {
		kube, err := client.New(c.RESTConfig, client.Options{Scheme: NewScheme()})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Kube = kube
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	sim, err := ec2sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	endpoint, err := sim.Start(ctx, "127.0.0.1:0")
	if err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); <-sim.Stopped() })
	return sim, endpoint
}

// InstallAWSForTest prepares c for the AWS provider's controller, for t:
// karpx's CRDs (manifests/crds, beside opts.BinDir) and over them the AWS
// provider's (InstallAWSCRDs), its chart's RBAC (AWSRBACManifests) and a
// kubeconfig of ServiceAccount AWSNamespace/AWSServiceAccount in
// opts.Workdir (a t.TempDir when empty). It returns opts with BinDir,
// Workdir, ClusterName and Kubeconfig filled in, ready for StartAWS (as
// often as a test restarts the controller). It skips t with -short; a
// missing or stale bin/karpenter-aws fails t naming the fix (`make test`
// builds it).
func InstallAWSForTest(t testing.TB, c *cluster.Cluster, opts AWSOptions) AWSOptions {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real control plane and bin/karpenter-aws; skipped with -short")
	}
	dir := opts.BinDir
	if dir == "" {
		var err error
		if dir, err = cluster.BinDir(); err != nil {
			t.Fatal(err)
		}
	}
	if err := CheckAWSBinary(filepath.Join(dir, AWSBinaryName)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mod, err := AWSModuleDir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRDs(ctx, filepath.Join(filepath.Dir(dir), "manifests", "crds")); err != nil {
		t.Fatal(err)
	}
	if err := InstallAWSCRDs(ctx, c, mod); err != nil {
		t.Fatal(err)
	}
	if opts.ClusterName == "" {
		opts.ClusterName = c.Name
	}
	rbac, err := AWSRBACManifests(mod, opts.ClusterName)
	if err != nil {
		t.Fatal(err)
	}
	rbacDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(rbacDir, "karpenter-rbac.yaml"), rbac, 0o644); err != nil {
		t.Fatal(err)
	}
	sa := cluster.ServiceAccountForTest(t, c.RESTConfig, rbacDir, AWSNamespace, AWSServiceAccount)
	if opts.Workdir == "" {
		opts.Workdir = t.TempDir()
	}
	opts.BinDir = dir
	opts.Kubeconfig = filepath.Join(opts.Workdir, "karpenter-aws.kubeconfig")
	if err := cluster.WriteKubeconfig(sa, opts.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	return opts
}

// StartAWSForTest is InstallAWSForTest, then StartAWSProcessForTest.
func StartAWSForTest(t testing.TB, c *cluster.Cluster, opts AWSOptions) *Karpenter {
	t.Helper()
	return StartAWSProcessForTest(t, c, InstallAWSForTest(t, c, opts))
}

// StartAWSProcessForTest starts bin/karpenter-aws (StartAWS) with opts as
// InstallAWSForTest returned them, for t: it stops the controller when t
// ends, fails t when the controller's log shows an API request its RBAC
// refused, and logs the end of its log when t failed. A start error fails
// t.
func StartAWSProcessForTest(t testing.TB, c *cluster.Cluster, opts AWSOptions) *Karpenter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k, err := StartAWS(ctx, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.Stop(); err != nil {
			t.Errorf("stopping %s: %v", k.Name, err)
		}
		for _, line := range k.Forbidden() {
			t.Errorf("RBAC: %s: %s (the chart's roles lack it)", k.Name, line)
		}
		if t.Failed() {
			t.Logf("--- %s log (last 8 KiB) ---\n%s", k.Name, k.LogTail(8<<10))
		}
	})
	return k
}

// Forbidden returns the lines of the log (every start's file is its own)
// that report an API request the server refused for want of RBAC
// (" is forbidden: ").
func (k *Karpenter) Forbidden() []string {
	return ForbiddenLines(k.LogPath)
}

// ForbiddenLines returns the lines of the log file at path that report an
// API request the server refused for want of RBAC (" is forbidden: "), or
// the read error as the one line.
func ForbiddenLines(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, " is forbidden: ") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}
