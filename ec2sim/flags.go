package ec2sim

import (
	"flag"
	"strings"
	"time"
)

// CommandFlags are cmd/ec2sim's command-line flags. AddFlags registers them;
// the command and test/docs (which checks that every ec2sim flag the docs
// name exists) share it.
type CommandFlags struct {
	// Listen is the address of the EC2/SSM/SQS API, admin endpoints and
	// metrics (--listen, default 127.0.0.1:4566).
	Listen string
	// Region, Zones (comma-separated, empty: <region>a,b,c), AccountID,
	// ClusterName and KubernetesVersion (minor, e.g. 1.35) seed Config.
	Region, Zones, AccountID, ClusterName, KubernetesVersion string
	// Kubeconfig is the cluster instances join as Nodes (empty: none).
	Kubeconfig string
	// MarkReady sets Config.MarkReady (--mark-ready).
	MarkReady bool
	// BootDelay, PendingDelay and TerminatedRetention set Config's fields
	// of the same names.
	BootDelay, PendingDelay, TerminatedRetention time.Duration
	// Throttle applies EC2's token buckets (--throttle, default true).
	Throttle bool
	// Neighbours is ThrottleConfig.Neighbours, in [0, 0.99] (--neighbours).
	Neighbours float64
	// IAMRoles and IAMRolePatterns are comma-separated lists (--iam-roles,
	// --iam-role-patterns; default DefaultIAMRolePatterns).
	IAMRoles, IAMRolePatterns string
	// InterruptionQueue is the SQS queue name (--interruption-queue; empty: none).
	InterruptionQueue string
	// SpotInterruptionNotice is Config.SpotInterruptionNotice (default 2m).
	SpotInterruptionNotice time.Duration
	// ClusterEndpoint is Config.ClusterEndpoint (--cluster-endpoint; empty:
	// the kubeconfig's server).
	ClusterEndpoint string
	// ServiceIPv4CIDR is Config.ServiceIPv4CIDR (--service-ipv4-cidr).
	ServiceIPv4CIDR string
	// Seed seeds resource ids and probabilistic faults (--seed).
	Seed uint64
	// Verbose logs at debug level (-v).
	Verbose bool
}

// AddFlags registers every CommandFlags field on fs with its default.
func (f *CommandFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Listen, "listen", "127.0.0.1:4566", "address to serve the EC2/SSM/SQS API, admin endpoints and metrics on")
	fs.StringVar(&f.Region, "region", "us-east-1", "AWS region to simulate")
	fs.StringVar(&f.Zones, "zones", "", "comma-separated availability zones (default <region>a,b,c)")
	fs.StringVar(&f.AccountID, "account-id", "123456789012", "account id owning the simulated resources")
	fs.StringVar(&f.ClusterName, "cluster-name", "karpx", "cluster name for the karpenter.sh/discovery tags of subnets and security groups")
	fs.StringVar(&f.KubernetesVersion, "kubernetes-version", "1.35", "Kubernetes minor version whose EKS AMIs are seeded")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster instances join as Nodes (empty: they never join)")
	fs.BoolVar(&f.MarkReady, "mark-ready", false, "set the Node Ready condition in the simulator (for clusters without kwok)")
	fs.DurationVar(&f.BootDelay, "boot-delay", time.Second, "time from running to Node registration")
	fs.DurationVar(&f.PendingDelay, "pending-delay", 200*time.Millisecond, "time from launch to running")
	fs.DurationVar(&f.TerminatedRetention, "terminated-retention", DefaultTerminatedRetention, "how long terminated instances stay visible to DescribeInstances (EC2: about an hour)")
	fs.BoolVar(&f.Throttle, "throttle", true, "apply EC2's request token buckets (RequestLimitExceeded)")
	fs.Float64Var(&f.Neighbours, "neighbours", 0, "share of every EC2/SSM token bucket, in [0, 0.99], used by the account's other clients")
	fs.StringVar(&f.IAMRoles, "iam-roles", "", "comma-separated IAM role names that exist (for EC2NodeClass spec.role), besides --iam-role-patterns")
	fs.StringVar(&f.IAMRolePatterns, "iam-role-patterns", strings.Join(DefaultIAMRolePatterns, ","), "comma-separated path.Match patterns of IAM role names that exist (empty: none)")
	fs.StringVar(&f.InterruptionQueue, "interruption-queue", "", "name of the SQS queue that receives spot interruption, rebalance, AWS Health and state-change events (empty: no queue)")
	fs.DurationVar(&f.SpotInterruptionNotice, "spot-interruption-notice", SpotInterruptionNotice, "time from a spot interruption warning to the instance's termination (EC2: 2m)")
	fs.StringVar(&f.ClusterEndpoint, "cluster-endpoint", "", "API server URL EKS DescribeCluster answers (empty: the --kubeconfig server)")
	fs.StringVar(&f.ServiceIPv4CIDR, "service-ipv4-cidr", defaultServiceCIDR, "service CIDR EKS DescribeCluster answers as kubernetesNetworkConfig.serviceIpv4Cidr")
	fs.Uint64Var(&f.Seed, "seed", 1, "seed of resource ids and probabilistic faults")
	fs.BoolVar(&f.Verbose, "v", false, "debug logging (every launch, termination and injected fault)")
}
