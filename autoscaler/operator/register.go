package operator

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	ec2v1 "github.com/karpx/karpx/apis/v1"
	instancestatuscontroller "github.com/karpx/karpx/autoscaler/aws/controllers/instancestatus"
	"github.com/karpx/karpx/autoscaler/aws/controllers/interruption"
	nodeclasscapacity "github.com/karpx/karpx/autoscaler/aws/controllers/nodeclass/capacity"
	nodeclassstatus "github.com/karpx/karpx/autoscaler/aws/controllers/nodeclass/status"
	nodeclasstermination "github.com/karpx/karpx/autoscaler/aws/controllers/nodeclass/termination"
	"github.com/karpx/karpx/autoscaler/aws/hydration"
	awsinstancestatus "github.com/karpx/karpx/autoscaler/aws/providers/instancestatus"
	"github.com/karpx/karpx/autoscaler/aws/providers/instancetype"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/controllers/disruption"
	"github.com/karpx/karpx/autoscaler/controllers/garbagecollection"
	nodehealth "github.com/karpx/karpx/autoscaler/controllers/node/health"
	"github.com/karpx/karpx/autoscaler/controllers/nodeclaim/lifecycle"
	nodepoolstatic "github.com/karpx/karpx/autoscaler/controllers/nodepool/static"
	nodepoolstatus "github.com/karpx/karpx/autoscaler/controllers/nodepool/status"
	"github.com/karpx/karpx/autoscaler/controllers/provisioning"
	"github.com/karpx/karpx/autoscaler/controllers/termination"
	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	"github.com/karpx/karpx/autoscaler/nodeoverlay"
	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
	"github.com/karpx/karpx/autoscaler/state/launchhealth"
	"github.com/karpx/karpx/autoscaler/state/launchlatency"
	"github.com/karpx/karpx/autoscaler/state/podcache"
)

// registrations are New's steps after the manager and the cloud provider
// exist, in the order they run: each registers one controller (or the
// probes) with its options. Provisioning comes before disruption, whose
// pass reads the same pod cache, and disruption before interruption,
// which triggers it.
var registrations = []func(*wiring) error{
	registerProvisioning,
	registerLifecycle,
	registerNodeTermination,
	registerNodeRepair,
	registerDisruption,
	registerNodeOverlay,
	registerInterruption,
	registerInstanceStatus,
	registerCapacityBlockExpiration,
	registerGarbageCollection,
	registerNodePoolStatus,
	registerStaticCapacity,
	registerNodeClassCapacity,
	registerNodeClassTermination,
	registerNodeClassStatus,
	registerProbes,
}

// wiring is what the registrations share: the manager, the options, the
// cloud provider and the state several controllers read or write. Each
// registration fills the parts of op it builds.
type wiring struct {
	ctx      context.Context
	mgr      manager.Manager
	opts     Options
	cloud    cloudprovider.CloudProvider
	pods     *podcache.Client
	recorder record.EventRecorder
	// health is the launch-health tracker: provisioning skips paused
	// (NodePool, EC2NodeClass) pairs, lifecycle records failures, NodePool
	// status reports them.
	health *launchhealth.Tracker
	// latency follows pods from pending to CreateFleet (provisioning
	// plans, lifecycle launches).
	latency *launchlatency.Tracker
	// overlays are the evaluated NodeOverlays the instance types pass
	// through (nil without the NodeOverlay gate).
	overlays *nodeoverlay.Store
	op       Operator
}

// newWiring builds the cloud provider with newCloud, registers the
// karpenter_* metrics and the informer indexes, and creates the shared
// state. It returns the first error, wrapped with what failed.
func newWiring(ctx context.Context, mgr manager.Manager, opts Options, newCloud CloudProviderFactory) (*wiring, error) {
	cloud, err := newCloud(ctx, mgr.GetClient())
	if err != nil {
		return nil, fmt.Errorf("creating cloud provider: %w", err)
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
	pods, err := podcache.New(ctx, mgr.GetClient(), mgr.GetCache())
	if err != nil {
		return nil, err
	}
	// One recorder for every controller. controller-runtime deprecates
	// GetEventRecorderFor for the events.k8s.io recorder, whose Eventf
	// takes a related object and an action: every controller's calls, their
	// tests' fake recorders and kubectl karpx's readers would change, a
	// separate piece of work.
	//lint:ignore SA1019 the core/v1 recorder on purpose, see above.
	recorder := mgr.GetEventRecorderFor("karpx")
	var overlays *nodeoverlay.Store
	if opts.NodeOverlay {
		overlays = nodeoverlay.NewStore()
		if u, ok := cloud.(interface{ UseNodeOverlays(*nodeoverlay.Store) }); ok {
			u.UseNodeOverlays(overlays)
		}
	}
	return &wiring{
		ctx: ctx, mgr: mgr, opts: opts, cloud: cloud, pods: pods, recorder: recorder, overlays: overlays,
		health:  launchhealth.New(launchhealth.Options{BaseBackoff: opts.LaunchBackoffBase, MaxBackoff: opts.LaunchBackoffMax}),
		latency: launchlatency.New(opts.LaunchLatencyHook),
		op:      Operator{Manager: mgr, CloudProvider: cloud, Hydration: opts.hydration},
	}, nil
}

// clock is the operator's clock (Options.clock).
func (w *wiring) clock() clock.WithTickerAndDelayedExecution { return w.opts.clock() }

// metered is the cloud provider as controller sees it: Karpenter's
// karpenter_cloudprovider_* metrics labelled with controller. Optional
// interfaces are asserted on w.cloud itself, not on this decorator.
func (w *wiring) metered(controller string) cloudprovider.CloudProvider {
	cloud := w.cloud
	if w.overlays != nil {
		cloud = nodeoverlay.Decorate(cloud, w.overlays)
	}
	return karpentermetrics.DecorateWithClock(cloud, controller, providerName(w.cloud), w.clock())
}

// registerProvisioning adds the provisioner. With a cloud provider that
// has data to hydrate (the AWS one) it also adds the hydrator, and the
// provisioner and /readyz wait for the instance types and offerings
// (problem P2: no "no instance types" error before the catalogue loads).
func registerProvisioning(w *wiring) error {
	w.op.Provisioner = provisioning.NewProvisioner(w.pods, w.metered(karpentermetrics.ControllerProvisioner), w.recorder, w.health, provisioning.Options{
		BatchIdleDuration:   w.opts.BatchIdleDuration,
		BatchMaxDuration:    w.opts.BatchMaxDuration,
		LaunchTTL:           w.opts.LaunchTTL,
		RegistrationTTL:     w.opts.RegistrationTTL,
		InitializationGrace: w.opts.InitializationGrace,
		MinValuesPolicy:     scheduling.MinValuesPolicy(w.opts.MinValuesPolicy),
		Latency:             w.latency,
	})
	var gates []func(manager.Runnable) manager.Runnable
	if src, ok := w.cloud.(hydrationSources); ok && w.opts.hydration != nil {
		log := logr.FromContextOrDiscard(w.ctx)
		if err := w.mgr.Add(hydration.NewHydrator(log, src.HydrationSources()...)); err != nil {
			return err
		}
		needs := []string{hydration.InstanceTypes, hydration.Offerings}
		w.opts.hydration.Require(needs...)
		if err := w.mgr.AddReadyzCheck("hydration", w.opts.hydration.Check); err != nil {
			return err
		}
		gates = append(gates, func(r manager.Runnable) manager.Runnable {
			return hydration.After(w.opts.hydration, r, log.WithName("provisioner"), needs...)
		})
	}
	if err := provisioning.Register(w.mgr, w.op.Provisioner, gates...); err != nil {
		return fmt.Errorf("registering provisioning: %w", err)
	}
	return nil
}

// registerLifecycle adds the NodeClaim lifecycle controller (launch,
// registration, initialisation, their TTLs and backoffs).
func registerLifecycle(w *wiring) error {
	lc := lifecycle.New(w.mgr.GetClient(), w.metered(karpentermetrics.ControllerNodeClaimLifecycle), w.recorder, w.health, lifecycle.Options{
		RegistrationTTL: w.opts.RegistrationTTL, LaunchBackoffBase: w.opts.LaunchBackoffBase, LaunchBackoffMax: w.opts.LaunchBackoffMax,
		LaunchTTL: w.opts.LaunchTTL, NodeNotReadyThreshold: w.opts.NodeNotReadyThreshold, Latency: w.latency})
	if err := lc.Register(w.mgr); err != nil {
		return fmt.Errorf("registering NodeClaim lifecycle: %w", err)
	}
	return nil
}

// registerNodeTermination adds the Node termination controller (drain,
// then the instance's termination).
func registerNodeTermination(w *wiring) error {
	c := termination.NewNodeController(w.mgr.GetClient(), w.mgr.GetAPIReader(), w.metered(karpentermetrics.ControllerNodeTermination), w.recorder, w.clock())
	if err := c.Register(w.mgr); err != nil {
		return fmt.Errorf("registering Node termination: %w", err)
	}
	return nil
}

// registerNodeRepair adds node repair (package node/health) when the
// NodeRepair feature gate is on and the cloud provider has repair
// policies, as Karpenter v1.14 registers its node health controller
// (pkg/controllers/controllers.go).
func registerNodeRepair(w *wiring) error {
	p, ok := w.cloud.(cloudprovider.RepairPolicyProvider)
	if !w.opts.NodeRepair || !ok || len(p.RepairPolicies()) == 0 {
		return nil
	}
	if err := nodehealth.New(w.mgr.GetClient(), p.RepairPolicies(), w.recorder, w.clock()).Register(w.mgr); err != nil {
		return fmt.Errorf("registering node repair: %w", err)
	}
	return nil
}

// registerNodeOverlay adds, with the NodeOverlay feature gate, the
// controller that evaluates NodeOverlays, writes their
// ValidationSucceeded condition and fills the store the metered cloud
// providers apply; each evaluation triggers a provisioning and a
// disruption pass, as Karpenter marks its cluster state unconsolidated.
func registerNodeOverlay(w *wiring) error {
	if w.overlays == nil {
		return nil
	}
	// The cloud's own instance types, metered under the name of
	// Karpenter's controller (pkg/controllers/nodeoverlay@v1.14.0 Name).
	cloud := karpentermetrics.DecorateWithClock(w.cloud, nodeoverlay.ControllerName, providerName(w.cloud), w.clock())
	c := nodeoverlay.NewController(w.mgr.GetClient(), cloud, w.overlays, w.clock(), w.mgr.GetLogger().WithName("nodeoverlay"))
	c.OnUpdate = func() {
		w.op.Provisioner.Trigger("nodeoverlay")
		w.op.Disruption.Trigger()
	}
	if err := c.Register(w.mgr, &ec2v1.EC2NodeClass{}); err != nil {
		return fmt.Errorf("registering NodeOverlay evaluation: %w", err)
	}
	return nil
}

// registerDisruption adds the disruption loop (emptiness, consolidation,
// drift, expiry) with its PodEvents controller. It sees pending pods'
// nodes through the grace window provisioning plans with.
func registerDisruption(w *wiring) error {
	w.op.Disruption = disruption.New(w.pods, w.mgr.GetAPIReader(), w.metered(karpentermetrics.ControllerDisruption), w.recorder, w.clock(), disruption.Options{
		Period: w.opts.DisruptionPeriod, Logger: w.mgr.GetLogger(),
		MinValuesPolicy:         scheduling.MinValuesPolicy(w.opts.MinValuesPolicy),
		SpotToSpotConsolidation: w.opts.SpotToSpotConsolidation,
		InitializationGrace:     w.opts.InitializationGrace})
	if err := disruption.Register(w.mgr, w.op.Disruption, disruption.NewPodEvents(w.mgr.GetClient(), w.clock())); err != nil {
		return fmt.Errorf("registering disruption: %w", err)
	}
	return nil
}

// unavailableOfferings is implemented by cloud providers with an
// unavailable-offerings cache (the AWS one).
type unavailableOfferings interface {
	UnavailableOfferings() *instancetype.UnavailableOfferings
}

// registerInterruption adds, when --interruption-queue names a queue, the
// interruption controller: it reads the queue, marks interrupted spot
// offerings unavailable in the cloud provider's cache and has disruption
// replace and drain the nodes. It returns an error naming the flag when
// the cloud provider has no unavailable-offerings cache.
func registerInterruption(w *wiring) error {
	if w.opts.interruptionQueue == nil {
		return nil
	}
	offerings, ok := w.cloud.(unavailableOfferings)
	if !ok {
		return fmt.Errorf("--interruption-queue %q: the cloud provider has no unavailable-offerings cache", w.opts.InterruptionQueue)
	}
	if err := interruption.IndexFields(w.ctx, w.mgr); err != nil {
		return err
	}
	return w.mgr.Add(interruption.New(w.mgr.GetClient(), w.opts.interruptionQueue, offerings.UnavailableOfferings(), w.recorder,
		w.clock(), w.op.Disruption.Trigger, interruption.Options{
			ActOnRebalance: w.opts.InterruptionActOnRebalance, Region: w.opts.Region, Logger: w.mgr.GetLogger()}))
}

// registerInstanceStatus adds, on EC2 (NewAWS set the provider), the
// controller that polls EC2 status checks and replaces the NodeClaims of
// impaired instances, whatever the feature gates and the interruption
// queue, as Karpenter v1.14 registers its interruption.instancestatus
// controller (aws/karpenter-provider-aws pkg/controllers/controllers.go).
// Its last poll is served at awsinstancestatus.HandlerPath.
func registerInstanceStatus(w *wiring) error {
	if w.opts.instanceStatus == nil {
		return nil
	}
	c := instancestatuscontroller.New(w.mgr.GetClient(), w.opts.instanceStatus, w.recorder, w.clock(),
		instancestatuscontroller.Options{Logger: w.mgr.GetLogger()})
	if w.opts.statusHandlers != nil {
		w.opts.statusHandlers[awsinstancestatus.HandlerPath] = c.Handler()
	}
	return w.mgr.Add(c)
}

// registerGarbageCollection adds the garbage collector of unclaimed
// instances and of NodeClaims whose instance is gone.
func registerGarbageCollection(w *wiring) error {
	return w.mgr.Add(garbagecollection.New(w.mgr.GetClient(), w.metered(karpentermetrics.ControllerGarbageCollection), w.recorder,
		garbagecollection.Options{Period: w.opts.GCPeriod, Grace: w.opts.GCGrace}))
}

// registerNodePoolStatus adds the NodePool status controller (resources,
// conditions, NodeRegistrationHealthy from the launch-health tracker).
func registerNodePoolStatus(w *wiring) error {
	if err := nodepoolstatus.New(w.mgr.GetClient(), w.health, w.recorder).Register(w.mgr); err != nil {
		return fmt.Errorf("registering NodePool status: %w", err)
	}
	return nil
}

// registerStaticCapacity adds the static NodePool controller (package
// nodepool/static) when the StaticCapacity feature gate is on, as
// Karpenter v1.14 registers its static controllers
// (pkg/controllers/controllers.go).
func registerStaticCapacity(w *wiring) error {
	if !w.opts.StaticCapacity {
		return nil
	}
	if err := nodepoolstatic.New(w.mgr.GetClient(), w.mgr.GetAPIReader(), w.clock()).Register(w.mgr); err != nil {
		return fmt.Errorf("registering static capacity: %w", err)
	}
	return nil
}

// registerNodeClassCapacity adds the controller that feeds registered
// Nodes' allocatable to the cloud provider's capacity cache, when it has
// one (the AWS one).
func registerNodeClassCapacity(w *wiring) error {
	o, ok := w.cloud.(nodeclasscapacity.Observer)
	if !ok {
		return nil
	}
	if err := nodeclasscapacity.New(w.mgr.GetClient(), o).Register(w.mgr); err != nil {
		return fmt.Errorf("registering the capacity controller: %w", err)
	}
	return nil
}

// registerNodeClassTermination adds the EC2NodeClass finalizer's
// controller (instance profiles, launch templates), when the cloud
// provider cleans up after a node class.
func registerNodeClassTermination(w *wiring) error {
	cl, ok := w.cloud.(nodeclasstermination.Cleaner)
	if !ok {
		return nil
	}
	if err := nodeclasstermination.New(w.mgr.GetClient(), cl, w.recorder).Register(w.mgr); err != nil {
		return fmt.Errorf("registering EC2NodeClass termination: %w", err)
	}
	return nil
}

// registerNodeClassStatus adds the EC2NodeClass status controller
// (resolved subnets, security groups, AMIs, instance profile, readiness),
// when the cloud provider resolves node classes.
func registerNodeClassStatus(w *wiring) error {
	r, ok := w.cloud.(nodeclassstatus.Resolver)
	if !ok {
		return nil
	}
	if err := nodeclassstatus.New(w.mgr.GetClient(), r, w.recorder, nodeclassstatus.Options{}).Register(w.mgr); err != nil {
		return fmt.Errorf("registering EC2NodeClass status: %w", err)
	}
	return nil
}

// registerProbes adds /healthz (ping) and the informers' /readyz check.
func registerProbes(w *wiring) error {
	if err := w.mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return w.mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !w.mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	})
}
