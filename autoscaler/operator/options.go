package operator

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"k8s.io/utils/clock"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/karpx/karpx/autoscaler/aws/budget"
	"github.com/karpx/karpx/autoscaler/aws/controllers/interruption"
	"github.com/karpx/karpx/autoscaler/aws/hydration"
	awsinstancestatus "github.com/karpx/karpx/autoscaler/aws/providers/instancestatus"
	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/autoscaler/state/timeouts"
)

// Options configure the autoscaler. Every field has a flag and an
// environment variable (the flag name upper-cased with "-" → "_", e.g.
// CLUSTER_NAME); flags win over the environment.
type Options struct {
	// ClusterName is the EKS cluster name, used in tags and in the
	// karpenter.sh/discovery selectors of the examples. Required.
	ClusterName string
	// ClusterEndpoint is the API server URL written into node userData.
	ClusterEndpoint string
	// ClusterCABundle is the cluster CA (base64-encoded PEM) written into
	// node userData. Default: discovered from the controller's own API
	// server credentials (package clusterinfo).
	ClusterCABundle string
	// ClusterCIDR is the service CIDR written into AL2023's NodeConfig.
	// Default: discovered (the "kubernetes" ServiceCIDR, else the EKS
	// default holding the "kubernetes" Service's IP), else 10.100.0.0/16.
	ClusterCIDR string
	// Region is the AWS region, e.g. "us-east-1". Default: AWS_REGION or us-east-1.
	Region string
	// EC2Endpoint, when set, overrides the EC2 endpoint (the loopback
	// simulator in tests and the demo). Empty means the real regional endpoint.
	EC2Endpoint string
	// SSMEndpoint overrides the SSM endpoint; defaults to EC2Endpoint when that is set.
	SSMEndpoint string
	// KubernetesVersion selects the AMI alias SSM parameters, e.g. "1.35".
	// Default: the API server's version, else 1.35.
	KubernetesVersion string
	// RegistrationTTL is how long a launched NodeClaim may wait for its Node
	// before the instance is terminated. Default 15m, Karpenter's registration TTL.
	RegistrationTTL time.Duration
	// LaunchTTL is how long a NodeClaim may stay unlaunched (no instance)
	// before it is deleted and its pods planned again. Default 5m.
	LaunchTTL time.Duration
	// InitializationGrace is the grace window of in-flight and recently
	// initialised nodes (problem P4): startupTaints, known ephemeral taints
	// and node agents' taints, missing extended resources and a NotReady
	// shorter than it do not count against the pods planned onto them.
	// Pods planned onto an in-flight NodeClaim wait for it (nomination)
	// until it initialises, at most this long after it registered.
	// Default 5m; it must be positive (there is no off switch: the P4
	// control runs the real Karpenter in test/upstream).
	InitializationGrace time.Duration
	// NodeNotReadyThreshold is how long an initialised Node may be NotReady
	// before its NodeClaim reports it (condition NodeNotReady); this
	// report replaces nothing (node repair, behind the NodeRepair gate,
	// replaces the node after the cloud provider's toleration). Default
	// 30m, as Karpenter's node repair toleration for the Ready condition.
	NodeNotReadyThreshold time.Duration
	// BatchIdleDuration is how long the provisioner waits for more pending
	// pods after the last one arrived. Default 1s, Karpenter's BATCH_IDLE_DURATION.
	BatchIdleDuration time.Duration
	// BatchMaxDuration caps one provisioning batch window. Default 10s,
	// Karpenter's BATCH_MAX_DURATION.
	BatchMaxDuration time.Duration
	// LaunchBackoffBase is the first wait after a persistent launch failure
	// (per NodeClaim) and the first pause of a (NodePool, EC2NodeClass)
	// pair after launchhealth's threshold of consecutive failures with one
	// cause (3). Default 30s.
	LaunchBackoffBase time.Duration
	// LaunchBackoffMax caps both waits. Default 10m.
	LaunchBackoffMax time.Duration
	// DisruptionPeriod is the longest time between two disruption passes
	// (emptiness, consolidation, drift, expiry). Default 10s.
	DisruptionPeriod time.Duration
	// GCPeriod and GCGrace configure garbage collection (defaults 2m, 5m).
	GCPeriod, GCGrace time.Duration
	// MetricsBindAddress serves Prometheus metrics. Default ":8080"; "0" disables.
	MetricsBindAddress string
	// MetricsSecure serves the metrics port over HTTPS (a self-signed
	// certificate) and answers only requests whose bearer token passes a
	// TokenReview and whose user may "get" /metrics (SubjectAccessReview;
	// ClusterRole karpx-metrics-reader). Default true (--metrics-secure,
	// METRICS_SECURE); false serves plain HTTP to anyone.
	MetricsSecure bool
	// StatusBindAddress serves the status endpoints kubectl karpx reads
	// (/throttle, /hydration, /capacity) over plain HTTP, apart from
	// /metrics, so that the API server's service proxy (which passes no
	// user token on) reaches them while /metrics is authenticated.
	// Default ":8082" (--status-bind-address, STATUS_BIND_ADDRESS); "0"
	// disables it. It must differ from the metrics and probe addresses.
	StatusBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz. Default ":8081".
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's net/http/pprof (heap, CPU profiles)
	// for diagnosing memory and CPU use. Default "0": disabled.
	PprofBindAddress string
	// LeaderElection enables leader election (Lease in LeaderElectionNamespace). Default true.
	LeaderElection bool
	// LeaderElectionNamespace holds the Lease. Default: the pod's namespace or "kube-system".
	LeaderElectionNamespace string
	// Budget configures the client-side EC2/SSM token buckets (flags
	// --aws-api-budget-fraction, default 0.5, and
	// --aws-api-budget-adaptive-disabled; budget.Options.AddFlags).
	Budget budget.Options
	// MinValuesPolicy is what provisioning and consolidation do when a
	// NodePool requirement's minValues cannot be met: "Strict" (the pods
	// stay pending, with a FailedProvisioning event) or "BestEffort" (the
	// NodeClaim is planned with fewer values and annotated
	// karpenter.sh/nodeclaim-min-values-relaxed: "true"). Flag
	// --min-values-policy, env MIN_VALUES_POLICY; default Strict, as
	// Karpenter v1's operator option of the same name.
	MinValuesPolicy string
	// FeatureGates is Karpenter's --feature-gates (env FEATURE_GATES): a
	// comma-separated list of Name=true|false. karpx implements
	// SpotToSpotConsolidation, NodeRepair, StaticCapacity, NodeOverlay and
	// ReservedCapacity (all default false, as Karpenter v1.14's
	// pkg/operator/options/options.go, whose chart turns ReservedCapacity
	// on); Karpenter's CapacityBuffer gate is accepted only as false, so a
	// Karpenter value such as its default passes and none is silently
	// ignored. Validate parses it into SpotToSpotConsolidation, NodeRepair,
	// StaticCapacity, NodeOverlay and ReservedCapacity.
	FeatureGates string
	// SpotToSpotConsolidation is the parsed SpotToSpotConsolidation gate.
	SpotToSpotConsolidation bool
	// ReservedCapacity is the parsed ReservedCapacity gate: resolve
	// capacityReservationSelectorTerms (docs/reserved-capacity.md).
	ReservedCapacity bool
	// NodeRepair is the parsed NodeRepair gate: replace Nodes whose
	// conditions match the cloud provider's repair policies for longer
	// than their toleration (package autoscaler/controllers/node/health,
	// docs/node-repair.md). Default false, as Karpenter's.
	NodeRepair bool
	// StaticCapacity is the parsed StaticCapacity gate: keep NodePools
	// with spec.replicas at that many NodeClaims (package
	// autoscaler/controllers/nodepool/static, docs/static-capacity.md).
	// Default false, as Karpenter's.
	StaticCapacity bool
	// NodeOverlay is the parsed NodeOverlay gate: apply karpenter.sh/v1alpha1
	// NodeOverlays' prices and capacities to the instance types scheduling
	// and consolidation see (package autoscaler/nodeoverlay,
	// docs/node-overlay.md). Default false, as Karpenter's.
	NodeOverlay bool
	// InterruptionQueue is the name of the SQS queue EventBridge fills
	// with EC2 spot interruption warnings, rebalance recommendations,
	// state changes and AWS Health scheduled changes (docs/interruption.md).
	// Flag --interruption-queue, env INTERRUPTION_QUEUE; default "": off,
	// as Karpenter's settings.interruptionQueue.
	InterruptionQueue string
	// InterruptionActOnRebalance replaces and drains a node on a rebalance
	// recommendation as on a spot interruption warning. Flag
	// --interruption-act-on-rebalance; default false (an event and a
	// metric only, as Karpenter).
	InterruptionActOnRebalance bool
	// SQSEndpoint overrides the SQS endpoint; defaults to EC2Endpoint when
	// that is set (the simulator serves SQS too).
	SQSEndpoint string
	// interruptionQueue is the queue's provider (set by NewAWS).
	interruptionQueue interruption.Queue
	// instanceStatus lists the instances failing EC2 status checks (set
	// by NewAWS; nil: no instance status controller).
	instanceStatus *awsinstancestatus.Provider
	// statusHandlers are served on StatusBindAddress, path → handler
	// (set by NewAWS).
	statusHandlers map[string]http.Handler
	// onStop are called once the manager stops, each within
	// stopHookTimeout (set by NewAWS: the batcher's deferred tags).
	onStop []func(context.Context) error
	// hydration is the cloud data sets' registry (set by NewAWS).
	hydration *hydration.Registry
	// Clock is the time every controller, the cloud provider's metrics
	// decorator and cluster discovery read (k8s.io/utils/clock). Default
	// clock.RealClock; tests inject a fake one. No flag.
	Clock clock.WithTickerAndDelayedExecution
	// LaunchLatencyHook, when set, receives every provisioning-latency
	// observation (seconds from a pod first seen pending to its
	// NodeClaim's CreateFleet) besides the histogram
	// karpx_provisioning_pod_to_launch_seconds (benchmarks only). No flag.
	LaunchLatencyHook func(seconds float64)
	// SkipControllerNameValidation allows several operators in one process
	// (tests only; controller names key Prometheus metrics). No flag.
	SkipControllerNameValidation bool
}

// AddFlags registers every option on fs with its environment default.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.ClusterName, "cluster-name", env("CLUSTER_NAME", ""), "EKS cluster name (required); used in tags and discovery selectors")
	fs.StringVar(&o.ClusterEndpoint, "cluster-endpoint", env("CLUSTER_ENDPOINT", ""), "API server URL written into node userData")
	fs.StringVar(&o.ClusterCABundle, "cluster-ca-bundle", env("CLUSTER_CA_BUNDLE", ""), "base64-encoded cluster CA written into node userData (default: the controller's own API server CA)")
	fs.StringVar(&o.ClusterCIDR, "cluster-cidr", env("CLUSTER_CIDR", ""), "service CIDR written into node userData (default: discovered from the cluster)")
	fs.StringVar(&o.Region, "region", env("AWS_REGION", "us-east-1"), "AWS region")
	fs.StringVar(&o.EC2Endpoint, "ec2-endpoint", env("EC2_ENDPOINT", ""), "override the EC2 endpoint URL (e.g. the loopback simulator)")
	fs.StringVar(&o.SSMEndpoint, "ssm-endpoint", env("SSM_ENDPOINT", ""), "override the SSM endpoint URL (defaults to --ec2-endpoint when set)")
	fs.StringVar(&o.KubernetesVersion, "kubernetes-version", env("KUBERNETES_VERSION", ""), "Kubernetes minor version used to resolve AMI aliases, e.g. 1.35 (default: the API server's)")
	fs.DurationVar(&o.RegistrationTTL, "registration-ttl", envDuration("REGISTRATION_TTL", timeouts.RegistrationTTL), "terminate a launched NodeClaim whose Node has not registered after this long")
	fs.DurationVar(&o.LaunchTTL, "launch-ttl", envDuration("LAUNCH_TTL", timeouts.LaunchTTL), "delete a NodeClaim that has no instance after this long, so its pods are planned again")
	fs.DurationVar(&o.InitializationGrace, "initialization-grace-window", envDuration("INITIALIZATION_GRACE_WINDOW", timeouts.InitializationGrace), "how long startup/agent taints, missing extended resources and NotReady of in-flight and new nodes do not count against their pods, and how long pods wait for the NodeClaim they were planned onto once it registered; must be positive")
	fs.DurationVar(&o.NodeNotReadyThreshold, "node-not-ready-threshold", envDuration("NODE_NOT_READY_THRESHOLD", 30*time.Minute), "report a NodeClaim whose Node is NotReady longer than this (a report only; --feature-gates NodeRepair=true replaces broken nodes)")
	fs.DurationVar(&o.BatchIdleDuration, "batch-idle-duration", envDuration("BATCH_IDLE_DURATION", time.Second), "wait this long after the last pending pod before provisioning")
	fs.DurationVar(&o.BatchMaxDuration, "batch-max-duration", envDuration("BATCH_MAX_DURATION", 10*time.Second), "longest provisioning batch window")
	fs.DurationVar(&o.LaunchBackoffBase, "launch-backoff-base", envDuration("LAUNCH_BACKOFF_BASE", 30*time.Second), "first wait after a persistent launch failure; doubles per failure")
	fs.DurationVar(&o.LaunchBackoffMax, "launch-backoff-max", envDuration("LAUNCH_BACKOFF_MAX", 10*time.Minute), "longest wait after persistent launch failures")
	o.Budget.AddFlags(fs)
	fs.StringVar(&o.MinValuesPolicy, "min-values-policy", env("MIN_VALUES_POLICY", string(scheduling.MinValuesPolicyStrict)), "what to do when a NodePool's minValues cannot be met: Strict (pods stay pending) or BestEffort (launch with fewer values, annotated karpenter.sh/nodeclaim-min-values-relaxed)")
	fs.StringVar(&o.FeatureGates, "feature-gates", env("FEATURE_GATES", "SpotToSpotConsolidation=false,NodeRepair=false"), "Karpenter's feature gates, Name=true|false comma-separated: SpotToSpotConsolidation (replace spot nodes by spot under Karpenter's 15-cheaper-types rule), NodeRepair (replace nodes whose conditions stay unhealthy, docs/node-repair.md), StaticCapacity (keep NodePools with spec.replicas at that many nodes, docs/static-capacity.md), NodeOverlay (apply NodeOverlays' prices and capacities, docs/node-overlay.md), ReservedCapacity (capacityReservationSelectorTerms, docs/reserved-capacity.md); Karpenter's CapacityBuffer only as false")
	fs.DurationVar(&o.DisruptionPeriod, "disruption-period", envDuration("DISRUPTION_PERIOD", 10*time.Second), "longest time between two disruption passes (emptiness, consolidation, drift, expiry)")
	fs.DurationVar(&o.GCPeriod, "gc-period", envDuration("GC_PERIOD", 2*time.Minute), "period of instance/NodeClaim garbage collection")
	fs.DurationVar(&o.GCGrace, "gc-grace", envDuration("GC_GRACE", 5*time.Minute), "how long an instance stays unclaimed (or a NodeClaim's instance gone) before garbage collection acts")
	fs.StringVar(&o.InterruptionQueue, "interruption-queue", env("INTERRUPTION_QUEUE", ""), "name of the SQS queue of EC2 interruption events (docs/interruption.md); empty turns interruption handling off")
	fs.BoolVar(&o.InterruptionActOnRebalance, "interruption-act-on-rebalance", env("INTERRUPTION_ACT_ON_REBALANCE", "false") == "true", "replace and drain a node on an EC2 rebalance recommendation, as on a spot interruption warning (default: an event and a metric only)")
	fs.StringVar(&o.SQSEndpoint, "sqs-endpoint", env("SQS_ENDPOINT", ""), "override the SQS endpoint URL (defaults to --ec2-endpoint when set)")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", env("METRICS_BIND_ADDRESS", ":8080"), "Prometheus metrics address; 0 disables")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", env("METRICS_SECURE", "true") == "true", "serve metrics over HTTPS to authenticated, authorised clients only (TokenReview and SubjectAccessReview: RBAC get on /metrics, e.g. ClusterRole karpx-metrics-reader); false serves plain HTTP to anyone")
	fs.StringVar(&o.StatusBindAddress, "status-bind-address", env("STATUS_BIND_ADDRESS", ":8082"), "address of the plain-HTTP status endpoints kubectl karpx reads through the API server's service proxy (/throttle, /hydration, /capacity); 0 disables")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", env("HEALTH_PROBE_BIND_ADDRESS", ":8081"), "address of /healthz and /readyz")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", env("PPROF_BIND_ADDRESS", "0"), "address of Go's pprof endpoints (/debug/pprof/); 0 disables")
	fs.BoolVar(&o.LeaderElection, "leader-elect", env("LEADER_ELECT", "true") == "true", "enable leader election")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", env("POD_NAMESPACE", "kube-system"), "namespace of the leader-election Lease")
}

// Validate checks the options and fills defaults. It returns an error naming
// the flag to fix.
func (o *Options) Validate() error {
	var errs []error
	if o.ClusterName == "" {
		errs = append(errs, errors.New("--cluster-name (CLUSTER_NAME) is required: set it to the cluster's name, as used in the karpenter.sh/discovery tags"))
	}
	if o.Region == "" {
		errs = append(errs, errors.New("--region (AWS_REGION) is required"))
	}
	if o.SSMEndpoint == "" {
		o.SSMEndpoint = o.EC2Endpoint
	}
	if o.SQSEndpoint == "" {
		o.SQSEndpoint = o.EC2Endpoint
	}
	if o.InterruptionQueue != "" && !queueNamePattern.MatchString(o.InterruptionQueue) {
		errs = append(errs, fmt.Errorf("--interruption-queue (INTERRUPTION_QUEUE) %q: want the queue's name (1 to 80 letters, digits, '-' or '_', optionally ending .fifo), not its URL or ARN", o.InterruptionQueue))
	}

	if o.RegistrationTTL <= 0 {
		errs = append(errs, fmt.Errorf("--registration-ttl %s: must be positive", o.RegistrationTTL))
	}
	if o.LaunchTTL <= 0 {
		errs = append(errs, fmt.Errorf("--launch-ttl %s: must be positive", o.LaunchTTL))
	}
	if o.InitializationGrace <= 0 {
		errs = append(errs, fmt.Errorf("--initialization-grace-window (INITIALIZATION_GRACE_WINDOW) %s: must be positive, e.g. 5m (the default); it cannot be switched off", o.InitializationGrace))
	}
	if o.NodeNotReadyThreshold <= 0 {
		errs = append(errs, fmt.Errorf("--node-not-ready-threshold %s: must be positive", o.NodeNotReadyThreshold))
	}
	if o.BatchIdleDuration <= 0 || o.BatchMaxDuration < o.BatchIdleDuration {
		errs = append(errs, fmt.Errorf("--batch-idle-duration %s / --batch-max-duration %s: want 0 < idle <= max", o.BatchIdleDuration, o.BatchMaxDuration))
	}
	if o.DisruptionPeriod <= 0 || o.DisruptionPeriod > 10*time.Minute {
		errs = append(errs, fmt.Errorf("--disruption-period %s: want more than 0 and at most 10m", o.DisruptionPeriod))
	}
	if p := scheduling.MinValuesPolicy(o.MinValuesPolicy); p != scheduling.MinValuesPolicyStrict && p != scheduling.MinValuesPolicyBestEffort {
		errs = append(errs, fmt.Errorf("--min-values-policy (MIN_VALUES_POLICY) %q: want Strict or BestEffort", o.MinValuesPolicy))
	}
	if gates, err := parseFeatureGates(o.FeatureGates); err != nil {
		errs = append(errs, err)
	} else {
		o.SpotToSpotConsolidation, o.NodeRepair = gates.spotToSpot, gates.nodeRepair
		o.StaticCapacity, o.NodeOverlay = gates.staticCapacity, gates.nodeOverlay
		o.ReservedCapacity = gates.reservedCapacity
	}
	if err := o.Budget.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := o.validateAddresses(); err != nil {
		errs = append(errs, err)
	}
	if o.KubernetesVersion != "" && strings.Count(o.KubernetesVersion, ".") != 1 {
		errs = append(errs, fmt.Errorf("--kubernetes-version %q: want MAJOR.MINOR, e.g. 1.35", o.KubernetesVersion))
	}
	return errors.Join(errs...)
}

// featureGates are the gates karpx implements, as parseFeatureGates
// read them.
type featureGates struct {
	spotToSpot, nodeRepair      bool
	staticCapacity, nodeOverlay bool
	// reservedCapacity is ReservedCapacity (default false here; Karpenter
	// v1.14's chart turns it on).
	reservedCapacity bool
}

// parseFeatureGates reads --feature-gates as Karpenter writes it
// ("SpotToSpotConsolidation=true,NodeRepair=false"; empty is every gate
// off) and returns the SpotToSpotConsolidation, NodeRepair and
// StaticCapacity, NodeOverlay and ReservedCapacity gates. A
// gate karpx does not implement is refused when true, and an unknown name
// or a value other than true or false always.
func parseFeatureGates(in string) (featureGates, error) {
	var gates featureGates
	unsupported := map[string]bool{"CapacityBuffer": true}
	for _, kv := range strings.Split(in, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, value, _ := strings.Cut(kv, "=")
		on, perr := strconv.ParseBool(value)
		switch {
		case perr != nil:
			return featureGates{}, fmt.Errorf("--feature-gates (FEATURE_GATES) %q: want Name=true or Name=false", kv)
		case name == "SpotToSpotConsolidation":
			gates.spotToSpot = on
		case name == "NodeRepair":
			gates.nodeRepair = on
		case name == "StaticCapacity":
			gates.staticCapacity = on
		case name == "NodeOverlay":
			gates.nodeOverlay = on
		case name == "ReservedCapacity":
			gates.reservedCapacity = on
		case unsupported[name] && on:
			return featureGates{}, fmt.Errorf("--feature-gates (FEATURE_GATES) %s=true: not supported by karpx yet; remove it or set it to false", name)
		case !unsupported[name]:
			return featureGates{}, fmt.Errorf("--feature-gates (FEATURE_GATES) %q: unknown gate; karpx knows SpotToSpotConsolidation, NodeRepair, StaticCapacity, NodeOverlay and ReservedCapacity (and Karpenter's CapacityBuffer as false)", name)
		}
	}
	return gates, nil
}

// queueNamePattern is an SQS queue name (Amazon SQS API Reference,
// CreateQueue QueueName: up to 80 alphanumeric characters, hyphens and
// underscores; a FIFO queue's ends in .fifo).
var queueNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}(\.fifo)?$`)

func env(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

func envDuration(key string, def time.Duration) time.Duration {
	if v, ok := os.LookupEnv(key); ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

// clock is o.Clock, or the wall clock when the caller built Options
// without DefaultOptions.
func (o *Options) clock() clock.WithTickerAndDelayedExecution {
	if o.Clock == nil {
		return clock.RealClock{}
	}
	return o.Clock
}

// DefaultOptions returns the options every flag (and environment variable)
// defaults to, for callers that build the operator in-process.
func DefaultOptions() Options {
	var o Options
	o.AddFlags(flag.NewFlagSet("karpx", flag.ContinueOnError))
	o.Clock = clock.RealClock{}
	return o
}
