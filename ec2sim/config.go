package ec2sim

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Config configures a Simulator. The zero value is usable: every field has a
// documented default that New fills in.
type Config struct {
	// Region is the AWS region the simulator answers for. Default "us-east-1".
	Region string
	// AccountID is the 12-digit account that owns the simulated resources.
	// Default "123456789012".
	AccountID string
	// ClusterName is used for the karpenter.sh/discovery tag of the seeded
	// subnets and security group and for their Name tags. Default "karpx".
	ClusterName string
	// Zones are the availability zones, in order. Default: <Region>a,
	// <Region>b and <Region>c.
	Zones []string

	// Subnets are the subnets DescribeSubnets knows. Default: one subnet per
	// zone, 10.0.<32*i>.0/19 in a single VPC, tagged
	// karpenter.sh/discovery=<ClusterName>.
	Subnets []Subnet
	// SecurityGroups are the security groups DescribeSecurityGroups knows.
	// Default: one group "<ClusterName>-node" tagged
	// karpenter.sh/discovery=<ClusterName>.
	SecurityGroups []SecurityGroup
	// Images are added to the seeded public EKS AMIs (AL2023, AL2 and
	// Bottlerocket for KubernetesVersion); use it for private AMIs with tags.
	Images []Image
	// Parameters are extra SSM parameters (name → value) GetParameter
	// answers, besides the public EKS AMI aliases.
	Parameters map[string]string
	// IAMRoles are IAM roles that exist besides those matching
	// IAMRolePatterns (see iam.go).
	IAMRoles []string
	// IAMRolePatterns are path.Match patterns of role names that exist.
	// Nil means DefaultIAMRolePatterns (KarpenterNodeRole-*); an empty,
	// non-nil slice means none.
	IAMRolePatterns []string
	// KubernetesVersion is the minor version whose public AMIs are seeded
	// ("1.35"). SSM alias parameters of other versions create their AMIs on
	// first use. Default "1.35".
	KubernetesVersion string
	// KubeletVersion is reported in Node status.nodeInfo. Default "v1.35.4".
	KubeletVersion string
	// ClusterEndpoint is the API server URL EKS DescribeCluster answers as
	// cluster.endpoint (cmd/ec2sim: the kubeconfig's server). Default
	// "https://<ClusterName>.eks.<Region>.amazonaws.com.invalid", a name
	// that resolves nowhere.
	ClusterEndpoint string
	// ClusterCA is the PEM certificate bundle of the API server, answered
	// base64-encoded as cluster.certificateAuthority.data (cmd/ec2sim: the
	// kubeconfig's CA). Default: none (empty data).
	ClusterCA []byte
	// ServiceIPv4CIDR is cluster.kubernetesNetworkConfig.serviceIpv4Cidr.
	// Default "172.20.0.0/16": EKS picks 172.20.0.0/16 when the VPC is in
	// 10.0.0.0/8, as the simulated one is, and 10.100.0.0/16 otherwise
	// (EKS API Reference, KubernetesNetworkConfigRequest.serviceIpv4Cidr).
	ServiceIPv4CIDR string
	// Offered reports whether an instance type is offered in a zone; it
	// drives DescribeInstanceTypeOfferings and CreateFleet's "Unsupported"
	// errors. Default: every catalogue type in every zone.
	Offered func(instanceType, zone string) bool

	// PendingDelay is how long an instance stays "pending" before it is
	// "running". Default 200ms.
	PendingDelay time.Duration
	// ShuttingDownDelay is how long a terminated instance stays
	// "shutting-down" before it is "terminated". Default 1s.
	ShuttingDownDelay time.Duration
	// TerminatedRetention is how long terminated instances stay visible to
	// DescribeInstances, by ID and in listings, after they reached
	// "terminated". Default DefaultTerminatedRetention, EC2's.
	TerminatedRetention time.Duration
	// BootDelay is the time from "running" to the Node object appearing
	// (kubelet start and registration). Default 1s. A per-instance Behavior
	// can override it.
	BootDelay time.Duration
	// ResponseDelay is the minimum wall-clock time before any API answer
	// (EC2 itself takes tens of milliseconds). Default 2ms; negative means
	// none. Answering a loopback client faster than this exposes a race in
	// aws-sdk-go-v2 (smithy-go's request body wrapper and net/http's
	// request writer) that makes about 2% of calls fail with "use of closed
	// network connection"; see WrapTransport for the client-side fix.
	ResponseDelay time.Duration
	// ReconcileInterval is how often Run advances the kubelet emulation.
	// Default 100ms.
	ReconcileInterval time.Duration

	// InterruptionQueue is the name of the SQS queue New creates and the
	// simulated EventBridge rules (Karpenter's: spot interruption warnings,
	// rebalance recommendations, AWS Health events and every instance
	// state-change notification) send their events to, as Karpenter's
	// settings.interruptionQueue names it. Empty means no queue: SQS calls
	// naming it answer QueueDoesNotExist and events are dropped (spot
	// interruptions still reclaim their instances). See sqs.go, events.go.
	InterruptionQueue string
	// SpotInterruptionNotice is the time from a spot interruption warning
	// to the instance's termination. Default 2m, EC2's notice ("Spot
	// Instance interruption notices", EC2 User Guide); tests shorten it.
	// The warning's event time is back-dated so that time + 2 minutes is
	// still the moment of reclaim (see Interrupt).
	SpotInterruptionNotice time.Duration
	// ScheduledChangeLead is how far in the future the startTime of the
	// AWS Health scheduled-change events of Interrupt lies. Default 336h:
	// AWS pushes *_MAINTENANCE_SCHEDULED events about two weeks before
	// their start ("Reference: AWS Health events Amazon EventBridge schema").
	ScheduledChangeLead time.Duration

	// Throttle configures the request token buckets. The zero value means
	// the EC2 defaults (see DefaultThrottleConfig); set Disabled to turn
	// throttling off.
	Throttle ThrottleConfig

	// Kube is the cluster Nodes are created in; its scheme must contain
	// corev1 and karpenter.sh/v1. Nil means instances never join a cluster.
	Kube client.Client
	// MarkReady makes the simulator set the Node's Ready condition itself
	// (for clusters without kwok). Default false: a kwok controller started
	// with --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake
	// (or --manage-all-nodes) and
	// --disregard-status-with-annotation-selector=kwok.x-k8s.io/status=custom
	// makes Nodes Ready (KwokStatusAnnotation).
	MarkReady bool

	// Logger receives structured logs. Default: discard.
	Logger logr.Logger
	// Clock is the time source of the simulated world: instance lifecycles,
	// SQS visibility and long polls, FaultRule.For and the refill of the
	// throttling token buckets (a k8s.io/utils/clock/testing FakeClock
	// makes throttling exact). Injected latency and ResponseDelay stay
	// wall-clock time. Default: the real clock.
	Clock clock.WithTicker
	// Seed seeds resource ids and probabilistic faults, so runs with the
	// same seed and the same calls give the same ids. Default 1.
	Seed uint64
}

// Subnet is a simulated VPC subnet.
type Subnet struct {
	// ID is the subnet id, "subnet-" and 17 hex digits.
	ID string `json:"id"`
	// Zone is the availability zone name.
	Zone string `json:"zone"`
	// CIDR is the IPv4 block instances get private addresses from.
	CIDR string `json:"cidr"`
	// VPCID is the VPC of the subnet.
	VPCID string `json:"vpcId"`
	// Tags are the subnet's tags.
	Tags []Tag `json:"tags,omitempty"`
}

// SecurityGroup is a simulated security group.
type SecurityGroup struct {
	// ID is the group id, "sg-" and 17 hex digits.
	ID string `json:"id"`
	// Name is the group name.
	Name string `json:"name"`
	// Description is the group description.
	Description string `json:"description"`
	// VPCID is the VPC of the group.
	VPCID string `json:"vpcId"`
	// Tags are the group's tags.
	Tags []Tag `json:"tags,omitempty"`
}

// Image is a simulated AMI.
type Image struct {
	// ID is the AMI id, "ami-" and 17 hex digits. Default: derived from Name.
	ID string `json:"id"`
	// Name is the AMI name, e.g. amazon-eks-node-al2023-x86_64-standard-1.35-v20251101.
	Name string `json:"name"`
	// Architecture is "x86_64" or "arm64".
	Architecture string `json:"architecture"`
	// OwnerID is the owning account. Default: the EKS AMI account 602401143452.
	OwnerID string `json:"ownerId"`
	// OwnerAlias is "amazon" for public AWS AMIs, "" otherwise.
	OwnerAlias string `json:"ownerAlias,omitempty"`
	// Description is the AMI description.
	Description string `json:"description,omitempty"`
	// CreationDate is when the AMI was registered.
	CreationDate time.Time `json:"creationDate"`
	// Family is the OS family used for the Node's osImage: "al2023", "al2"
	// or "bottlerocket".
	Family string `json:"family,omitempty"`
	// Tags are the AMI's tags.
	Tags []Tag `json:"tags,omitempty"`
}

const (
	defaultRegion     = "us-east-1"
	defaultAccountID  = "123456789012"
	defaultCluster    = "karpx"
	defaultK8sVersion = "1.35"
	defaultKubelet    = "v1.35.4"
	// defaultServiceCIDR is the service block EKS assigns in a VPC of
	// 10.0.0.0/8 (see Config.ServiceIPv4CIDR).
	defaultServiceCIDR = "172.20.0.0/16"
	// eksAMIOwner is the account that publishes EKS-optimized AMIs in
	// us-east-1 (EKS user guide, "Retrieve recommended AMI IDs").
	eksAMIOwner = "602401143452"
	// DiscoveryTagKey is the tag Karpenter's selector terms conventionally use.
	DiscoveryTagKey = "karpenter.sh/discovery"
)

// withDefaults returns cfg with every unset field defaulted; it validates the
// fields it cannot default. Longer than 80 lines on purpose: it is a flat
// list, one default or check per Config field in the fields' order;
// splitting it would only cut the list in two.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Region == "" {
		cfg.Region = defaultRegion
	}
	if cfg.AccountID == "" {
		cfg.AccountID = defaultAccountID
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = defaultCluster
	}
	if len(cfg.Zones) == 0 {
		cfg.Zones = []string{cfg.Region + "a", cfg.Region + "b", cfg.Region + "c"}
	}
	for _, z := range cfg.Zones {
		if !strings.HasPrefix(z, cfg.Region) || len(z) <= len(cfg.Region) {
			return cfg, fmt.Errorf("ec2sim: zone %q is not in region %q", z, cfg.Region)
		}
	}
	if cfg.KubernetesVersion == "" {
		cfg.KubernetesVersion = defaultK8sVersion
	}
	if cfg.KubeletVersion == "" {
		cfg.KubeletVersion = defaultKubelet
	}
	if cfg.ClusterEndpoint == "" {
		cfg.ClusterEndpoint = "https://" + strings.ToLower(cfg.ClusterName) + ".eks." + cfg.Region + ".amazonaws.com.invalid"
	}
	if cfg.ServiceIPv4CIDR == "" {
		cfg.ServiceIPv4CIDR = defaultServiceCIDR
	}
	if p, err := netip.ParsePrefix(cfg.ServiceIPv4CIDR); err != nil || !p.Addr().Is4() {
		return cfg, fmt.Errorf("ec2sim: ServiceIPv4CIDR %q is not an IPv4 CIDR; use a block such as 10.96.0.0/12", cfg.ServiceIPv4CIDR)
	}
	if cfg.PendingDelay == 0 {
		cfg.PendingDelay = 200 * time.Millisecond
	}
	if cfg.ShuttingDownDelay == 0 {
		cfg.ShuttingDownDelay = time.Second
	}
	if cfg.TerminatedRetention == 0 {
		cfg.TerminatedRetention = DefaultTerminatedRetention
	}
	if cfg.BootDelay == 0 {
		cfg.BootDelay = time.Second
	}
	if cfg.ResponseDelay == 0 {
		cfg.ResponseDelay = 2 * time.Millisecond
	}
	if cfg.ReconcileInterval == 0 {
		cfg.ReconcileInterval = 100 * time.Millisecond
	}
	if cfg.SpotInterruptionNotice == 0 {
		cfg.SpotInterruptionNotice = SpotInterruptionNotice
	}
	if cfg.SpotInterruptionNotice < 0 {
		return cfg, fmt.Errorf("ec2sim: SpotInterruptionNotice %v is negative; use a positive duration (default 2m)", cfg.SpotInterruptionNotice)
	}
	if cfg.ScheduledChangeLead == 0 {
		cfg.ScheduledChangeLead = 14 * 24 * time.Hour
	}
	if cfg.InterruptionQueue != "" {
		if err := validQueueName(cfg.InterruptionQueue); err != nil {
			return cfg, fmt.Errorf("ec2sim: InterruptionQueue: %w", err)
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if err := cfg.Throttle.validateNeighbours(); err != nil {
		return cfg, err
	}
	cfg.Throttle = cfg.Throttle.withDefaults()
	ids := newIDGen(cfg.Seed ^ 0x5eed)
	vpc := ids.next("vpc-")
	if cfg.Subnets == nil {
		for i, z := range cfg.Zones {
			cfg.Subnets = append(cfg.Subnets, Subnet{
				ID:    ids.next("subnet-"),
				Zone:  z,
				CIDR:  fmt.Sprintf("10.0.%d.0/19", 32*i),
				VPCID: vpc,
				Tags: []Tag{
					{Key: "Name", Value: cfg.ClusterName + "-private-" + z},
					{Key: DiscoveryTagKey, Value: cfg.ClusterName},
				},
			})
		}
	}
	for _, sn := range cfg.Subnets {
		if _, err := netip.ParsePrefix(sn.CIDR); err != nil {
			return cfg, fmt.Errorf("ec2sim: subnet %s: %w", sn.ID, err)
		}
		if !contains(cfg.Zones, sn.Zone) {
			return cfg, fmt.Errorf("ec2sim: subnet %s is in unknown zone %q", sn.ID, sn.Zone)
		}
	}
	if cfg.SecurityGroups == nil {
		cfg.SecurityGroups = []SecurityGroup{{
			ID:          ids.next("sg-"),
			Name:        cfg.ClusterName + "-node",
			Description: "Karpenter-managed nodes of cluster " + cfg.ClusterName,
			VPCID:       vpc,
			Tags: []Tag{
				{Key: "Name", Value: cfg.ClusterName + "-node"},
				{Key: DiscoveryTagKey, Value: cfg.ClusterName},
			},
		}}
	}
	return cfg, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// DefaultTerminatedRetention is how long EC2 keeps a terminated instance
// visible to DescribeInstances: "Terminated instances remain visible after
// termination (for approximately one hour)" (Amazon EC2 API Reference,
// TerminateInstances). A shorter retention turns a client's batched
// DescribeInstances naming a recently terminated instance into
// InvalidInstanceID.NotFound for the whole call, which real EC2 answers
// with the instance in state terminated.
const DefaultTerminatedRetention = time.Hour
