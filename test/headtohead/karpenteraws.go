package headtohead

import (
	"context"
	"testing"
	"time"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/ec2sim"
	"github.com/karpx/karpx/test/cluster"
	"github.com/karpx/karpx/test/upstream"
)

// KarpenterAWS is the real Karpenter AWS provider's side: bin/karpenter-aws
// (make karpenter-aws, upstream.AWSVersion) started by test/upstream as its
// Helm chart's ServiceAccount with the chart's RBAC and its module's CRDs,
// against an ec2sim of its own configured exactly as karpx's (SimConfig:
// pending and boot delay, and ec2sim's default zones, prices and
// throttling buckets), with the same EC2NodeClass and NodePools.
type KarpenterAWS struct {
	cluster *cluster.Cluster
	sim     *ec2sim.Simulator
	opts    upstream.AWSOptions
}

// karpenterAWSUser is the identity the AWS provider runs as: its chart's
// ServiceAccount (upstream.AWSNamespace/upstream.AWSServiceAccount).
const karpenterAWSUser = "system:serviceaccount:" + upstream.AWSNamespace + ":" + upstream.AWSServiceAccount

// newKarpenterAWS returns the AWS provider's side, or nil (after failing
// t, naming the fix) when bin/karpenter-aws is missing or stale.
func newKarpenterAWS(t *testing.T, bin string) Autoscaler {
	if err := upstream.CheckAWSBinary(bin); err != nil {
		t.Errorf("Karpenter AWS side not run: %v", err)
		return nil
	}
	return &KarpenterAWS{}
}

// Name implements Autoscaler.
func (k *KarpenterAWS) Name() string { return "Karpenter AWS" }

// User implements Autoscaler.
func (k *KarpenterAWS) User() string { return karpenterAWSUser }

// NodeClassRef implements Autoscaler: the EC2NodeClass "default", as
// karpx's.
func (k *KarpenterAWS) NodeClassRef() karpv1.NodeClassReference { return (&Karpx{}).NodeClassRef() }

// Simulator implements Simulated: the side's own ec2sim.
func (k *KarpenterAWS) Simulator() *ec2sim.Simulator { return k.sim }

// Install implements Autoscaler: the simulator (SimConfig, as karpx's),
// karpx's and then the AWS provider's CRDs, the chart's RBAC and
// ServiceAccount kubeconfig (upstream.InstallAWSForTest), and the
// EC2NodeClass "default" (the same as karpx's).
func (k *KarpenterAWS) Install(ctx context.Context, tb testing.TB, c *cluster.Cluster, dir string, bootDelay time.Duration) {
	tb.Helper()
	k.cluster = c
	var endpoint string
	k.sim, endpoint = upstream.StartSimForTest(tb, c, SimConfig(c.Name, bootDelay))
	k.opts = upstream.InstallAWSForTest(tb, c, upstream.AWSOptions{Endpoint: endpoint, Workdir: dir})
	if _, err := c.Kubectl(ctx, []byte(upstream.EC2NodeClassYAML("default", c.Name, simAMIAlias)), "apply", "-f", "-"); err != nil {
		tb.Fatalf("applying the EC2NodeClass: %v", err)
	}
}

// Start implements Autoscaler: upstream.StartAWSProcessForTest with
// Karpenter's default batch window (BATCH_IDLE_DURATION 1s,
// BATCH_MAX_DURATION 10s) and ISOLATED_VPC=false (on-demand prices from
// ec2sim's Pricing GetProducts, spot prices from its
// DescribeSpotPriceHistory: the prices karpx reads), without leader
// election.
func (k *KarpenterAWS) Start(tb testing.TB) Controller {
	tb.Helper()
	return upstream.StartAWSProcessForTest(tb, k.cluster, k.opts)
}
