package operator

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/aws/hydration"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/controllers/disruption"
	"github.com/karpx/karpx/autoscaler/controllers/provisioning"
	"github.com/karpx/karpx/autoscaler/state/cachetransform"
)

// Scheme returns the controller manager's scheme: the built-in Kubernetes
// types, Karpenter's karpenter.sh/v1 (NodePool, NodeClaim) and karpx's
// karpenter.k8s.aws/v1 (EC2NodeClass), from apis/scheme.New.
func Scheme() *runtime.Scheme {
	return scheme.New()
}

// CloudProviderFactory builds the CloudProvider once the manager's client
// exists (the AWS provider reads EC2NodeClasses through it).
type CloudProviderFactory func(ctx context.Context, kube client.Client) (cloudprovider.CloudProvider, error)

// Operator is a configured autoscaler, ready to Start.
type Operator struct {
	// Manager is the controller-runtime manager every controller runs in.
	Manager manager.Manager
	// Provisioner is the pending-pods → NodeClaims loop.
	Provisioner *provisioning.Provisioner
	// Disruption is the scale-down loop (emptiness, consolidation, drift,
	// expiry).
	Disruption *disruption.Controller
	// CloudProvider is the cloud seam the controllers use.
	CloudProvider cloudprovider.CloudProvider
	// Hydration is the cloud data sets' registry (nil without one).
	Hydration *hydration.Registry
}

// New builds the manager and the cloud provider, then runs each of
// registrations in order: one function per controller, each passing that
// controller its options. It returns an error when the options are
// invalid, the API server is unreachable, the cloud provider cannot be
// built or a controller cannot be registered (the error names it).
func New(ctx context.Context, cfg *rest.Config, opts Options, newCloud CloudProviderFactory) (*Operator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	mgr, err := newManager(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := waitForKinds(ctx, mgr.GetRESTMapper(), kindsPollInterval, KindsTimeout, servedKinds...); err != nil {
		return nil, err
	}
	w, err := newWiring(ctx, mgr, opts, newCloud)
	if err != nil {
		return nil, err
	}
	for _, register := range registrations {
		if err := register(w); err != nil {
			return nil, err
		}
	}
	if err := addStatusServer(mgr, opts.StatusBindAddress, opts.statusHandlers); err != nil {
		return nil, err
	}
	for _, hook := range opts.onStop {
		if err := mgr.Add(stopHook(logr.FromContextOrDiscard(ctx), hook)); err != nil {
			return nil, err
		}
	}
	return &w.op, nil
}

// stopHookTimeout bounds each of Options.onStop: 10 s, a third of the
// manager's graceful shutdown period (30 s, controller-runtime v0.23
// pkg/manager/internal.go defaultGracefulShutdownPeriod), which the
// reconciles that are still running share with it.
const stopHookTimeout = 10 * time.Second

// stopHook is a Runnable (of the leader: only the leader launches) that
// waits for the manager to stop, then calls hook with stopHookTimeout and
// logs its error; it never fails the manager.
func stopHook(log logr.Logger, hook func(context.Context) error) manager.RunnableFunc {
	return func(ctx context.Context) error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), stopHookTimeout)
		defer cancel()
		if err := hook(sctx); err != nil {
			log.Error(err, "stopping: work still in flight was left unfinished", "waited", stopHookTimeout.String())
		}
		return nil
	}
}

// newManager builds the controller-runtime manager of opts: scheme,
// trimmed informers, metrics and probe addresses, leader election. It
// returns the error of ctrl.NewManager (e.g. an unreachable API server).
func newManager(ctx context.Context, cfg *rest.Config, opts Options) (manager.Manager, error) {
	log := logr.FromContextOrDiscard(ctx)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: Scheme(),
		Logger: log,
		// issue 12: informers keep only what karpx reads (managedFields,
		// pods' env/probes/volume sources/container statuses, nodes'
		// images dropped): the cache is most of the controller's memory.
		Cache: cachetransform.Options(),
		// Runnables (the provisioner, the garbage collector) get their
		// context from BaseContext; without it they would get
		// context.Background(), where logr.FromContextOrDiscard finds no
		// logger and every line they log is dropped. Controllers' reconcile
		// contexts carry the manager's Logger already.
		BaseContext:             func() context.Context { return logr.NewContext(context.Background(), log) },
		Metrics:                 metricsOptions(opts),
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		PprofBindAddress:        opts.PprofBindAddress,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        "karpx-leader-election",
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// A replica that shuts down hands the Lease over at once instead
		// of making the next leader wait out its 15-s lease duration.
		LeaderElectionReleaseOnCancel: true,
		Controller: config.Controller{
			SkipNameValidation: &opts.SkipControllerNameValidation,
			// controller-runtime v0.23.3's priority queue can deadlock on
			// shutdown (kubernetes-sigs/controller-runtime#3538, fixed by
			// #3540 after v0.23.3): a worker that leaves through ShutDown
			// stays counted as a waiter, the queue blocks handing it an
			// item while holding its lock, and every worker then blocks
			// in Done. Seen here after a retry storm as a manager that
			// overran its 30-s grace period (and so would hold the leader
			// lease until killed). The classic rate-limited workqueue has
			// no such state; turn the priority queue back on with a
			// controller-runtime release that has the fix.
			UsePriorityQueue: ptr.To(false),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	return mgr, nil
}

// hydrationSources is implemented by cloud providers whose data a
// hydration.Hydrator loads (the AWS one).
type hydrationSources interface {
	HydrationSources() []hydration.Source
}

// Start runs every controller until ctx is done.
func (o *Operator) Start(ctx context.Context) error { return o.Manager.Start(ctx) }

// providerName is the karpenter_cloudprovider_* provider label of cloud:
// its Name() ("aws" for the EC2 cloud provider), "unknown" without one.
func providerName(cloud cloudprovider.CloudProvider) string {
	if n, ok := cloud.(interface{ Name() string }); ok {
		return n.Name()
	}
	return "unknown"
}

// metricsOptions returns the metrics server's options: /metrics only (the
// status endpoints have a server of their own, status.go), over HTTPS
// behind controller-runtime's authentication and authorization filter
// (TokenReview, then SubjectAccessReview of the request's path and verb)
// with opts.MetricsSecure, else plain HTTP.
func metricsOptions(opts Options) metricsserver.Options {
	o := metricsserver.Options{BindAddress: opts.MetricsBindAddress}
	if opts.MetricsSecure {
		o.SecureServing, o.FilterProvider = true, filters.WithAuthenticationAndAuthorization
	}
	return o
}
