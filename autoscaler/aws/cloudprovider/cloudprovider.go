package cloudprovider

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/capacity"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/hydration"
	"github.com/karpx/karpx/autoscaler/aws/providers/ami"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation"
	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
	"github.com/karpx/karpx/autoscaler/aws/providers/instanceprofile"
	"github.com/karpx/karpx/autoscaler/aws/providers/instancetype"
	"github.com/karpx/karpx/autoscaler/aws/providers/launchtemplate"
	"github.com/karpx/karpx/autoscaler/aws/providers/securitygroup"
	"github.com/karpx/karpx/autoscaler/aws/providers/subnet"
	"github.com/karpx/karpx/autoscaler/aws/providers/userdata"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/nodeoverlay"
)

// DefaultMaxInstanceTypes caps the instance types offered to one CreateFleet.
// Source: Karpenter's MaxInstanceTypes (60), which keeps requests well under
// CreateFleet's override limits while leaving EC2 room to find capacity.
const DefaultMaxInstanceTypes = 60

// Options configure a CloudProvider.
type Options struct {
	// ClusterName is the cluster's name, used in tags
	// (kubernetes.io/cluster/<name>, eks:eks-cluster-name), launch template
	// names and userData. Required.
	ClusterName string
	// ClusterEndpoint is the API server URL written into userData.
	// Required unless every EC2NodeClass uses amiFamily Custom.
	ClusterEndpoint string
	// ClusterCABundle is the cluster CA, base64-encoded PEM, written into
	// userData. Empty lets the node fetch it (AL2) or fail TLS (AL2023,
	// Bottlerocket), so set it outside tests.
	ClusterCABundle string
	// ClusterCIDR is the service CIDR written into AL2023's NodeConfig.
	// Default userdata.DefaultClusterCIDR (10.100.0.0/16).
	ClusterCIDR string
	// KubernetesVersion ("1.35") selects the AMI alias SSM parameters.
	// Default ami.DefaultKubernetesVersion.
	KubernetesVersion string
	// Region is the AWS region, used in error messages. Default "the region".
	Region string
	// KubeClient reads EC2NodeClasses by name. Required.
	KubeClient client.Reader
	// EC2API is the AWS API every provider calls. Required.
	EC2API ec2api.API
	// IAMAPI manages the instance profiles of spec.role. Default: EC2API
	// when it implements ec2api.IAMAPI (an *ec2api.Client does); required
	// otherwise.
	IAMAPI ec2api.IAMAPI
	// Logger receives structured logs. Default: discard.
	Logger logr.Logger
	// MaxInstanceTypes caps the instance types per CreateFleet. Default
	// DefaultMaxInstanceTypes.
	MaxInstanceTypes int
	// Hydration receives the state of every cloud data set (instance
	// types, offerings, spot prices, subnets, security groups, AMIs).
	// Default: a private registry.
	Hydration *hydration.Registry
	// Capacity is the learned-capacity cache to use (served by the
	// operator at capacity.HandlerPath). Default: a new one.
	Capacity *capacity.Cache
	// Clock stamps the deletion time of a shutting-down instance's
	// NodeClaim view (Get, List) and judges capacity reservations' ends.
	// Default clock.RealClock.
	Clock clock.PassiveClock
	// ReservedCapacity is Karpenter's ReservedCapacity feature gate: when
	// true, spec.capacityReservationSelectorTerms resolve into
	// status.capacityReservations and the CapacityReservationsReady
	// condition (DescribeCapacityReservations); when false both stay
	// unset, as in Karpenter.
	ReservedCapacity bool
}

// CloudProvider implements cloudprovider.CloudProvider on EC2. Create it
// with New; it is safe for concurrent use.
type CloudProvider struct {
	opts            Options
	log             logr.Logger
	subnets         *subnet.Provider
	securityGroups  *securitygroup.Provider
	amis            *ami.Provider
	instanceTypes   *instancetype.Provider
	launchTemplates *launchtemplate.Provider
	instances       *instance.Provider
	// networks caches, per instance ID, the instance as DescribeInstances
	// answered (its subnet and security groups, which drift compares).
	networks cache.Store[string, *instance.Instance]
	capacity *capacity.Cache
	profiles *instanceprofile.Provider
	// overlays are the NodeOverlays Create applies (UseNodeOverlays); nil
	// without the NodeOverlay feature gate.
	overlays *nodeoverlay.Store
	// reservations resolves capacityReservationSelectorTerms and counts
	// each reservation's free places.
	reservations *capacityreservation.Provider
}

var _ cloudprovider.CloudProvider = (*CloudProvider)(nil)

// New validates opts, fills defaults and returns a CloudProvider. It makes
// no AWS call.
func New(opts Options) (*CloudProvider, error) {
	var errs []error
	if opts.ClusterName == "" {
		errs = append(errs, errors.New("Options.ClusterName is required"))
	}
	if opts.KubeClient == nil {
		errs = append(errs, errors.New("Options.KubeClient is required"))
	}
	if opts.EC2API == nil {
		errs = append(errs, errors.New("Options.EC2API is required"))
	}
	if opts.IAMAPI == nil {
		if iamAPI, ok := opts.EC2API.(ec2api.IAMAPI); ok {
			opts.IAMAPI = iamAPI
		} else if opts.EC2API != nil {
			errs = append(errs, errors.New("Options.IAMAPI is required (Options.EC2API does not implement ec2api.IAMAPI)"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("aws cloud provider: %w", err)
	}
	if opts.ClusterCIDR == "" {
		opts.ClusterCIDR = userdata.DefaultClusterCIDR
	}
	if opts.KubernetesVersion == "" {
		opts.KubernetesVersion = ami.DefaultKubernetesVersion
	}
	region := opts.Region // before the default, which is for messages
	if opts.Region == "" {
		opts.Region = "the region"
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.MaxInstanceTypes <= 0 {
		opts.MaxInstanceTypes = DefaultMaxInstanceTypes
	}
	if opts.Capacity == nil {
		opts.Capacity = capacity.New()
	}
	if opts.Hydration == nil {
		opts.Hydration = hydration.NewRegistry()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	log := opts.Logger.WithName("aws")
	unavailable := instancetype.NewUnavailableOfferings()
	ttls := cache.DefaultTTLs()
	return &CloudProvider{
		opts:           opts,
		log:            log,
		subnets:        subnet.NewProvider(opts.EC2API, ttls),
		securityGroups: securitygroup.NewProvider(opts.EC2API, ttls),
		amis:           ami.NewProvider(opts.EC2API, opts.KubernetesVersion, ttls),
		instanceTypes: instancetype.NewProvider(opts.EC2API, unavailable, ttls, instancetype.Options{
			Registry: opts.Hydration, Logger: log.WithName("instancetype")}),
		launchTemplates: launchtemplate.NewProvider(opts.EC2API, opts.ClusterName, log, ttls),
		instances:       instance.NewProvider(opts.EC2API, opts.ClusterName, unavailable),
		networks:        cache.New[string, *instance.Instance](instanceNetworkEntries, ttls.Default),
		capacity:        opts.Capacity,
		profiles:        instanceprofile.NewProvider(opts.IAMAPI, opts.ClusterName, region, log, ttls),
		reservations:    capacityreservation.NewProvider(opts.EC2API, ttls, opts.Clock),
	}, nil
}

// Name is the cloud provider's name, "aws", as Karpenter's AWS provider
// reports it in the provider label of karpenter_cloudprovider_* metrics.
func (c *CloudProvider) Name() string { return "aws" }

// HydrationSources are the data sets a hydration.Hydrator loads at start
// and refreshes: the instance-type catalogue (with its offerings) every
// cache.InstanceTypesTTL and spot prices every cache.SpotPriceTTL.
func (c *CloudProvider) HydrationSources() []hydration.Source {
	return []hydration.Source{
		{Name: hydration.InstanceTypes, Refresh: c.instanceTypes.RefreshCatalogue, Period: cache.InstanceTypesTTL},
		{Name: hydration.SpotPrices, Refresh: c.instanceTypes.RefreshSpotPrices, Period: cache.SpotPriceTTL},
	}
}

// UnavailableOfferings exposes the offerings marked unavailable after
// InsufficientInstanceCapacity, for metrics and tests.
func (c *CloudProvider) UnavailableOfferings() *instancetype.UnavailableOfferings {
	return c.instanceTypes.Unavailable()
}

// CapacityReservations is the capacity reservation provider the
// EC2NodeClass status and the launches use: its cache and its counts of
// free places are shared with the Capacity Block expiration controller
// and the report `kubectl karpx` reads (Provider.Handler).
func (c *CloudProvider) CapacityReservations() *capacityreservation.Provider { return c.reservations }

// GetInstanceTypes implements cloudprovider.CloudProvider.
func (c *CloudProvider) GetInstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	ref := nodePool.Spec.Template.Spec.NodeClassRef
	if ref == nil || ref.Name == "" {
		return nil, &cloudprovider.NodeClassNotReadyError{Reason: fmt.Sprintf("NodePool %q has no spec.template.spec.nodeClassRef.name", nodePool.Name)}
	}
	r, err := c.resolve(ctx, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("NodePool %q: %w", nodePool.Name, err)
	}
	return r.instanceTypes, nil
}

// getNodeClass reads an EC2NodeClass; a missing one is NodeClassNotReady.
func (c *CloudProvider) getNodeClass(ctx context.Context, name string) (*v1.EC2NodeClass, error) {
	nc := &v1.EC2NodeClass{}
	if err := c.opts.KubeClient.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &cloudprovider.NodeClassNotReadyError{NodeClass: name, Reason: "EC2NodeClass not found; create it or fix the NodePool's spec.template.spec.nodeClassRef.name"}
		}
		return nil, fmt.Errorf("reading EC2NodeClass %q: %w", name, err)
	}
	if !nc.DeletionTimestamp.IsZero() {
		return nil, &cloudprovider.NodeClassNotReadyError{NodeClass: name, Reason: "EC2NodeClass is being deleted"}
	}
	return nc, nil
}
