package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/smithy-go/middleware"
	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/karpx/karpx/autoscaler/aws/batcher"
	"github.com/karpx/karpx/autoscaler/aws/budget"
	"github.com/karpx/karpx/autoscaler/aws/capacity"
	awscloud "github.com/karpx/karpx/autoscaler/aws/cloudprovider"
	"github.com/karpx/karpx/autoscaler/aws/clusterinfo"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/hydration"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation/reservationreport"
	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
	awsinstancestatus "github.com/karpx/karpx/autoscaler/aws/providers/instancestatus"
	"github.com/karpx/karpx/autoscaler/aws/providers/sqs"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// NewAWS builds the autoscaler on EC2. Every EC2/SSM call goes, in this
// order, through the caches of the providers, the batcher (concurrent
// CreateFleet, DescribeInstances and TerminateInstances calls merged) and
// the SDK client (standard credential
// chain and retryer) with the client-side budget on its middleware stack
// (token buckets at opts.Budget.Fraction of AWS's documented rates, with
// priorities, taken before every call and every retry). The budget's
// status is served at budget.HandlerPath ("/throttle") on the metrics
// address, for `kubectl karpx throttle`. It returns an error when the AWS
// configuration cannot be loaded or the options are invalid.
func NewAWS(ctx context.Context, cfg *rest.Config, opts Options) (*Operator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log := logr.FromContextOrDiscard(ctx)
	if err := discoverClusterSettings(ctx, log, cfg, &opts); err != nil {
		return nil, err
	}
	budgetOpts := opts.Budget
	budgetOpts.Registerer = crmetrics.Registry
	budgetOpts.Logger = log // budget.New names it "budget"
	limiter := budget.New(budgetOpts)
	raw, err := ec2api.New(ctx, ec2api.Config{
		Region:       opts.Region,
		BaseEndpoint: opts.EC2Endpoint,
		SSMEndpoint:  opts.SSMEndpoint,
		SQSEndpoint:  opts.SQSEndpoint,
		APIOptions:   []func(*middleware.Stack) error{limiter.AddToStack}, // EC2 and SSM only
	})
	if err != nil {
		return nil, err
	}
	if opts.InterruptionQueue != "" {
		opts.interruptionQueue = sqs.New(raw, opts.InterruptionQueue)
	}
	// Per-NodeClaim tags are applied by one CreateTags per instance after
	// the merged CreateFleet, in the background, so that launches of
	// identical configuration share one CreateFleet and none waits for
	// its tags.
	api := batcher.New(raw, batcher.Options{
		DeferredTagKeys: instance.NodeClaimTagKeys,
		NodeClaimTagKey: instance.TagNodeClaim,
		Registerer:      crmetrics.Registry,
		Logger:          log, // batcher.New names it "batcher"
	})
	// Deferred tags still in flight when the manager stops get a few
	// seconds to land, then are cancelled, so none outlives the manager.
	opts.onStop = append(opts.onStop, api.Stop)
	// EC2 status checks are polled through the batcher and the budget,
	// as every other EC2 call (docs/node-repair.md).
	opts.instanceStatus = awsinstancestatus.New(api, opts.clock())
	reg := hydration.NewRegistry()
	opts.hydration = reg
	capCache := capacity.New()
	// The capacity reservations' counts, once the cloud provider exists
	// (an empty report until then).
	var reservations atomic.Pointer[capacityreservation.Provider]
	opts.statusHandlers = map[string]http.Handler{budget.HandlerPath: limiter.Handler(), hydration.HandlerPath: reg.Handler(), capacity.HandlerPath: capCache.Handler(),
		reservationreport.HandlerPath: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if p := reservations.Load(); p != nil {
				p.Handler().ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"reservations":[]}` + "\n"))
		})}
	return New(ctx, cfg, opts, func(ctx context.Context, kube client.Client) (cloudprovider.CloudProvider, error) {
		cp, err := awscloud.New(awscloud.Options{
			ClusterName:       opts.ClusterName,
			ClusterEndpoint:   opts.ClusterEndpoint,
			ClusterCABundle:   opts.ClusterCABundle,
			ClusterCIDR:       opts.ClusterCIDR,
			KubernetesVersion: opts.KubernetesVersion,
			Region:            opts.Region,
			KubeClient:        kube,
			EC2API:            api,
			IAMAPI:            raw, // IAM has its own quotas: no EC2 budget or batching
			Logger:            log,
			Hydration:         reg,
			Capacity:          capCache,
			Clock:             opts.clock(),
			ReservedCapacity:  opts.ReservedCapacity,
		})
		if err != nil {
			return nil, err
		}
		reservations.Store(cp.CapacityReservations())
		return cp, nil
	})
}

// DiscoveryTimeout is how long the operator waits at start for an API
// server that answers transiently (restarting, overloaded, unreachable)
// before it gives up on discovering the cluster settings and exits.
const DiscoveryTimeout = 2 * time.Minute

// discoverClusterSettings fills the CA bundle, Kubernetes version and
// service CIDR that no flag set from the cluster (package clusterinfo);
// what the API server definitely cannot tell keeps the cloud provider's
// default, logged. It returns an error, and the controller does not
// start, when the API server answered only transiently for
// DiscoveryTimeout: a default taken on a blip would give this process
// other launch templates than the process before it (problem: a second
// instance for a NodeClaim whose launch a restart interrupted).
func discoverClusterSettings(ctx context.Context, log logr.Logger, cfg *rest.Config, opts *Options) error {
	if opts.ClusterCABundle != "" && opts.KubernetesVersion != "" && opts.ClusterCIDR != "" {
		return nil
	}
	dctx, cancel := context.WithTimeout(logr.NewContext(ctx, log), DiscoveryTimeout)
	defer cancel()
	info, err := clusterinfo.DiscoverWithClock(dctx, cfg, opts.clock())
	if err != nil {
		if errors.Is(err, clusterinfo.ErrNoAnswer) {
			return fmt.Errorf("the API server did not answer within %s; not starting with default cluster settings (set --cluster-ca-bundle, --kubernetes-version and --cluster-cidr to start without asking): %w", DiscoveryTimeout, err)
		}
		log.Info("some cluster settings were not discovered; using defaults (set the flags to override)", "error", err.Error())
	}
	if opts.ClusterCABundle == "" {
		opts.ClusterCABundle = info.CABundle
	}
	if opts.KubernetesVersion == "" {
		opts.KubernetesVersion = info.KubernetesVersion
	}
	if opts.ClusterCIDR == "" {
		opts.ClusterCIDR = info.ServiceCIDR
	}
	log.Info("cluster settings", "kubernetesVersion", opts.KubernetesVersion, "serviceCIDR", opts.ClusterCIDR, "caBundle", opts.ClusterCABundle != "")
	return nil
}
