package operator

import (
	"context"
	"fmt"
	"k8s.io/utils/ptr"
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/aws/controllers/interruption"
	nodeclasscapacity "github.com/karpx/karpx/autoscaler/aws/controllers/nodeclass/capacity"
	nodeclassstatus "github.com/karpx/karpx/autoscaler/aws/controllers/nodeclass/status"
	nodeclasstermination "github.com/karpx/karpx/autoscaler/aws/controllers/nodeclass/termination"
	"github.com/karpx/karpx/autoscaler/aws/hydration"
	"github.com/karpx/karpx/autoscaler/aws/providers/instancetype"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/controllers/disruption"
	"github.com/karpx/karpx/autoscaler/controllers/garbagecollection"
	"github.com/karpx/karpx/autoscaler/controllers/nodeclaim/lifecycle"
	nodepoolstatus "github.com/karpx/karpx/autoscaler/controllers/nodepool/status"
	"github.com/karpx/karpx/autoscaler/controllers/provisioning"
	"github.com/karpx/karpx/autoscaler/controllers/termination"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/autoscaler/state/cachetransform"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
	"github.com/karpx/karpx/autoscaler/state/launchhealth"
	"github.com/karpx/karpx/autoscaler/state/launchlatency"
	"github.com/karpx/karpx/autoscaler/state/podcache"
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

// New builds the manager and registers every controller. It returns an error
// when the options are invalid, the API server is unreachable, or the cloud
// provider cannot be built.
//
// Longer than 80 lines on purpose: it is the operator's wiring, one block
// per controller in the order they depend on each other (manager, metrics,
// cloud provider, hydration gate, then each controller's Register), each a
// few lines of construction; split, the same dozen shared values (manager,
// recorder, health tracker, cloud provider) would travel through every
// piece and the order would no longer read in one place.
func New(ctx context.Context, cfg *rest.Config, opts Options, newCloud CloudProviderFactory) (*Operator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
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
	cloud, err := newCloud(ctx, mgr.GetClient())
	if err != nil {
		return nil, fmt.Errorf("creating cloud provider: %w", err)
	}
	// Karpenter's karpenter_cloudprovider_* metrics: each controller gets
	// the cloud provider through a decorator naming it; optional
	// interfaces are asserted on cloud itself below.
	metered := func(controller string) cloudprovider.CloudProvider {
		return karpentermetrics.Decorate(cloud, controller, providerName(cloud))
	}
	if err := karpentermetrics.Register(ctx, mgr); err != nil {
		return nil, fmt.Errorf("registering karpenter_* metrics: %w", err)
	}
	if err := clusterstate.IndexFields(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	// issue 12: the provisioner's and disruption's passes read every pod
	// as pointers into the informer store (podcache), not as a copied
	// []corev1.Pod per pass.
	podReader, err := podcache.New(ctx, mgr.GetClient(), mgr.GetCache())
	if err != nil {
		return nil, err
	}
	var health *launchhealth.Tracker
	if opts.LaunchHealth {
		health = launchhealth.New(launchhealth.Options{BaseBackoff: opts.LaunchBackoffBase, MaxBackoff: opts.LaunchBackoffMax})
	}
	latency := launchlatency.New(opts.LaunchLatencyHook)
	// One recorder for every controller. controller-runtime deprecates
	// GetEventRecorderFor for the events.k8s.io recorder, whose Eventf
	// takes a related object and an action: every controller's calls, their
	// tests' fake recorders and kubectl karpx's readers would change, a
	// separate piece of work.
	//lint:ignore SA1019 the core/v1 recorder on purpose, see above.
	recorder := mgr.GetEventRecorderFor("karpx")
	prov := provisioning.NewProvisioner(podReader, metered(karpentermetrics.ControllerProvisioner), recorder, health, provisioning.Options{
		BatchIdleDuration: opts.BatchIdleDuration,
		BatchMaxDuration:  opts.BatchMaxDuration,
		IgnoreInFlight:    !opts.CountInFlight,
		LaunchTTL:         opts.LaunchTTL,
		RegistrationTTL:   opts.RegistrationTTL,
		// --initialization-grace-window=0 switches the grace window off.
		InitializationGrace:        opts.InitializationGrace,
		DisableInitializationGrace: opts.InitializationGrace <= 0,
		DisableNomination:          !opts.NominatePods,
		MinValuesPolicy:            scheduling.MinValuesPolicy(opts.MinValuesPolicy),
		Latency:                    latency,
	})
	var gates []func(manager.Runnable) manager.Runnable
	if src, ok := cloud.(hydrationSources); ok && opts.hydration != nil {
		// Problem P2: the catalogue is loaded before anything uses it.
		if err := mgr.Add(hydration.NewHydrator(logr.FromContextOrDiscard(ctx), src.HydrationSources()...)); err != nil {
			return nil, err
		}
		if opts.HydrationOrdering {
			needs := []string{hydration.InstanceTypes, hydration.Offerings}
			opts.hydration.Require(needs...)
			if err := mgr.AddReadyzCheck("hydration", opts.hydration.Check); err != nil {
				return nil, err
			}
			gates = append(gates, func(r manager.Runnable) manager.Runnable {
				return hydration.After(opts.hydration, r, logr.FromContextOrDiscard(ctx).WithName("provisioner"), needs...)
			})
		}
	}
	if err := provisioning.Register(mgr, prov, gates...); err != nil {
		return nil, fmt.Errorf("registering provisioning: %w", err)
	}
	lc := lifecycle.New(mgr.GetClient(), metered(karpentermetrics.ControllerNodeClaimLifecycle), recorder, health, lifecycle.Options{
		RegistrationTTL: opts.RegistrationTTL, LaunchBackoffBase: opts.LaunchBackoffBase, LaunchBackoffMax: opts.LaunchBackoffMax,
		LaunchTTL: opts.LaunchTTL, NodeNotReadyThreshold: opts.NodeNotReadyThreshold, Latency: latency})
	if err := lc.Register(mgr); err != nil {
		return nil, fmt.Errorf("registering NodeClaim lifecycle: %w", err)
	}
	if err := termination.NewNodeController(mgr.GetClient(), metered(karpentermetrics.ControllerNodeTermination), recorder, clock.RealClock{}).Register(mgr); err != nil {
		return nil, fmt.Errorf("registering Node termination: %w", err)
	}
	disrupt := disruption.New(podReader, mgr.GetAPIReader(), metered(karpentermetrics.ControllerDisruption), recorder, clock.RealClock{}, disruption.Options{
		Period: opts.DisruptionPeriod, EdgeTriggered: opts.DisruptionEdgeTriggered, Logger: mgr.GetLogger(),
		MinValuesPolicy:         scheduling.MinValuesPolicy(opts.MinValuesPolicy),
		SpotToSpotConsolidation: opts.SpotToSpotConsolidation,
		// The grace window provisioning plans with, so disruption sees
		// the nodes pending pods will land on as provisioning does.
		InitializationGrace: opts.InitializationGrace, DisableInitializationGrace: opts.InitializationGrace <= 0})
	if err := disruption.Register(mgr, disrupt, disruption.NewPodEvents(mgr.GetClient(), clock.RealClock{})); err != nil {
		return nil, fmt.Errorf("registering disruption: %w", err)
	}
	if opts.interruptionQueue != nil {
		if err := registerInterruption(ctx, mgr, opts, cloud, disrupt, recorder); err != nil {
			return nil, err
		}
	}
	if err := mgr.Add(garbagecollection.New(mgr.GetClient(), metered(karpentermetrics.ControllerGarbageCollection), recorder, garbagecollection.Options{Period: opts.GCPeriod, Grace: opts.GCGrace})); err != nil {
		return nil, err
	}
	if err := nodepoolstatus.New(mgr.GetClient(), health, recorder).Register(mgr); err != nil {
		return nil, fmt.Errorf("registering NodePool status: %w", err)
	}
	if o, ok := cloud.(nodeclasscapacity.Observer); ok {
		if err := nodeclasscapacity.New(mgr.GetClient(), o).Register(mgr); err != nil {
			return nil, fmt.Errorf("registering the capacity controller: %w", err)
		}
	}
	if cl, ok := cloud.(nodeclasstermination.Cleaner); ok {
		if err := nodeclasstermination.New(mgr.GetClient(), cl, recorder).Register(mgr); err != nil {
			return nil, fmt.Errorf("registering EC2NodeClass termination: %w", err)
		}
	}
	if r, ok := cloud.(nodeclassstatus.Resolver); ok {
		if err := nodeclassstatus.New(mgr.GetClient(), r, recorder, nodeclassstatus.Options{}).Register(mgr); err != nil {
			return nil, fmt.Errorf("registering EC2NodeClass status: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return &Operator{Manager: mgr, Provisioner: prov, Disruption: disrupt, CloudProvider: cloud, Hydration: opts.hydration}, nil
}

// unavailableOfferings is implemented by cloud providers with an
// unavailable-offerings cache (the AWS one).
type unavailableOfferings interface {
	UnavailableOfferings() *instancetype.UnavailableOfferings
}

// registerInterruption adds the interruption controller: it reads
// opts.interruptionQueue, marks interrupted spot offerings unavailable in
// cloud's cache and has disrupt replace and drain the nodes; recorder is
// the one every controller shares.
func registerInterruption(ctx context.Context, mgr manager.Manager, opts Options, cloud cloudprovider.CloudProvider, disrupt *disruption.Controller, recorder record.EventRecorder) error {
	offerings, ok := cloud.(unavailableOfferings)
	if !ok {
		return fmt.Errorf("--interruption-queue %q: the cloud provider has no unavailable-offerings cache", opts.InterruptionQueue)
	}
	if err := interruption.IndexFields(ctx, mgr); err != nil {
		return err
	}
	return mgr.Add(interruption.New(mgr.GetClient(), opts.interruptionQueue, offerings.UnavailableOfferings(), recorder,
		clock.RealClock{}, disrupt.Trigger, interruption.Options{
			ActOnRebalance: opts.InterruptionActOnRebalance, Region: opts.Region, Logger: mgr.GetLogger()}))
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

// metricsOptions returns the metrics server's options: plain HTTP, or with
// opts.MetricsSecure HTTPS behind controller-runtime's authentication and
// authorization filter (TokenReview, then SubjectAccessReview of the
// request's path and verb).
func metricsOptions(opts Options) metricsserver.Options {
	o := metricsserver.Options{BindAddress: opts.MetricsBindAddress, ExtraHandlers: opts.metricsHandlers}
	if opts.MetricsSecure {
		o.SecureServing, o.FilterProvider = true, filters.WithAuthenticationAndAuthorization
	}
	return o
}
