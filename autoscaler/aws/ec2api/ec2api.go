package ec2api

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go/middleware"

	"github.com/karpx/karpx/autoscaler/state/launchlatency"
)

// API lists every EC2 and SSM operation karpx calls (EC2API and SSMAPI).
// Method signatures are the SDK's own, so *ec2.Client-style paginators
// (ec2.NewDescribeInstanceTypesPaginator and friends) accept an API
// directly.
type API interface {
	EC2API
	SSMAPI
}

// EC2API lists every EC2 operation karpx calls, with the SDK's signatures:
// an *ec2.Client implements it.
type EC2API interface {
	// DescribeInstanceTypes lists instance type details (paginated).
	DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	// DescribeInstanceTypeOfferings lists the zones each type is sold in (paginated).
	DescribeInstanceTypeOfferings(ctx context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error)
	// DescribeAvailabilityZones maps zone names to zone IDs.
	DescribeAvailabilityZones(ctx context.Context, in *ec2.DescribeAvailabilityZonesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeAvailabilityZonesOutput, error)
	// DescribeSubnets resolves subnetSelectorTerms.
	DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	// DescribeSecurityGroups resolves securityGroupSelectorTerms.
	DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
	// DescribeImages resolves amiSelectorTerms and alias image IDs.
	DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
	// CreateLaunchTemplate creates a content-addressed launch template.
	CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, optFns ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	// DescribeLaunchTemplates finds an existing launch template by name.
	DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
	// DeleteLaunchTemplate removes a launch template karpx created.
	DeleteLaunchTemplate(ctx context.Context, in *ec2.DeleteLaunchTemplateInput, optFns ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error)
	// CreateFleet launches instances (karpx always uses Type=instant).
	CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, optFns ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	// DescribeInstances reads instances by ID or by tag filters (paginated).
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	// TerminateInstances terminates instances by ID.
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, optFns ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	// CreateTags adds tags to existing resources.
	CreateTags(ctx context.Context, in *ec2.CreateTagsInput, optFns ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
	// DescribeSpotPriceHistory reads current spot prices (paginated).
	DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
	// DescribeCapacityReservations resolves capacityReservationSelectorTerms (paginated).
	DescribeCapacityReservations(ctx context.Context, in *ec2.DescribeCapacityReservationsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
	// DescribeInstanceStatus lists instances whose EC2 status checks are
	// impaired or that have scheduled events (paginated;
	// autoscaler/aws/providers/instancestatus).
	DescribeInstanceStatus(ctx context.Context, in *ec2.DescribeInstanceStatusInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error)
}

// SSMAPI lists every SSM operation karpx calls, with the SDK's signature:
// an *ssm.Client implements it.
type SSMAPI interface {
	// GetParameter reads an SSM parameter (public AMI aliases).
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// IAMAPI lists every IAM operation karpx calls, with the SDK's signatures
// (an *iam.Client implements it): managing the instance
// profile of an EC2NodeClass's spec.role (autoscaler/aws/providers/instanceprofile).
// It is separate from API because IAM is a global service with its own
// quotas: the EC2 request budget and batcher do not apply to it.
type IAMAPI interface {
	// GetInstanceProfile reads an instance profile and its role.
	GetInstanceProfile(ctx context.Context, in *iam.GetInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.GetInstanceProfileOutput, error)
	// CreateInstanceProfile creates the profile of a spec.role, tagged.
	CreateInstanceProfile(ctx context.Context, in *iam.CreateInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error)
	// TagInstanceProfile restores the cluster and class tags of a profile.
	TagInstanceProfile(ctx context.Context, in *iam.TagInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.TagInstanceProfileOutput, error)
	// AddRoleToInstanceProfile puts spec.role into the profile.
	AddRoleToInstanceProfile(ctx context.Context, in *iam.AddRoleToInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error)
	// RemoveRoleFromInstanceProfile takes a replaced or finalized role out.
	RemoveRoleFromInstanceProfile(ctx context.Context, in *iam.RemoveRoleFromInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.RemoveRoleFromInstanceProfileOutput, error)
	// DeleteInstanceProfile deletes a profile karpx created.
	DeleteInstanceProfile(ctx context.Context, in *iam.DeleteInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.DeleteInstanceProfileOutput, error)
}

// SQSAPI lists every SQS operation karpx calls, with the SDK's signatures
// (an *sqs.Client implements it): reading the interruption
// queue (autoscaler/aws/providers/sqs). It is separate from API because SQS
// has its own quotas (none per action for standard queues, Amazon SQS
// Developer Guide, "Amazon SQS quotas"): the EC2 request budget and
// batcher do not apply to it.
type SQSAPI interface {
	// GetQueueUrl resolves the queue's name to its URL.
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	// ReceiveMessage long-polls the queue.
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	// DeleteMessage deletes a handled message by its receipt handle.
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Config selects the AWS region, endpoint and credentials of a Client.
type Config struct {
	// Region is the AWS region, for example "us-east-1". Empty uses the
	// region of the standard chain (AWS_REGION, shared config, IMDS).
	Region string
	// BaseEndpoint, when set, sends EC2 requests (and SSM requests, unless
	// SSMEndpoint is set) to this URL instead of the regional AWS endpoints,
	// for example "http://127.0.0.1:40123" for the loopback EC2 simulator.
	BaseEndpoint string
	// SSMEndpoint, when set, sends SSM requests to this URL. Empty means
	// BaseEndpoint.
	SSMEndpoint string
	// IAMEndpoint, when set, sends IAM requests to this URL. Empty means
	// BaseEndpoint (the EC2 simulator answers IAM too), or IAM's global
	// endpoint when BaseEndpoint is empty.
	IAMEndpoint string
	// SQSEndpoint, when set, sends SQS requests to this URL. Empty means
	// BaseEndpoint (the EC2 simulator answers SQS too), or SQS's regional
	// endpoint when BaseEndpoint is empty.
	SQSEndpoint string
	// Credentials overrides the standard credentials chain (environment,
	// shared config and credentials files, web identity, IMDS). Nil uses
	// the chain.
	Credentials aws.CredentialsProvider
	// RetryMaxAttempts caps attempts per request of the SDK's standard
	// retryer (exponential backoff with jitter, retry quota). Zero keeps the
	// SDK default of 3.
	RetryMaxAttempts int
	// APIOptions are added to the middleware stack of every EC2 and SSM
	// call (the operations of API), after the SDK's own, e.g. the
	// client-side request budget's budget.Limiter.AddToStack. IAM and SQS
	// calls, which have their own quotas, do not get them.
	APIOptions []func(*middleware.Stack) error
}

// Client is karpx's AWS client: the EC2, SSM, IAM and SQS SDK clients,
// each behind the interface that lists the operations karpx calls. It has
// no methods of its own: a call goes straight to the SDK client, and what
// runs around it is on that client's middleware stack (Config.APIOptions,
// launchIssued). Its method set is exactly API, IAMAPI and SQSAPI, so the
// IAM policy test (test/cluster), which reads those interfaces, sees every
// call a holder of a Client can make.
type Client struct {
	EC2API
	SSMAPI
	IAMAPI
	SQSAPI
}

var (
	_ API    = (*Client)(nil)
	_ IAMAPI = (*Client)(nil)
	_ SQSAPI = (*Client)(nil)
)

// New loads the AWS configuration with config.LoadDefaultConfig (standard
// credentials chain and standard retryer), applies cfg and returns a Client.
// It fails only when the shared configuration files cannot be parsed.
func New(ctx context.Context, cfg Config) (*Client, error) {
	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(cfg.Credentials))
	}
	if cfg.RetryMaxAttempts > 0 {
		opts = append(opts, config.WithRetryMaxAttempts(cfg.RetryMaxAttempts))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	c := NewFromConfig(awsCfg, cfg.BaseEndpoint, cfg.SSMEndpoint, cfg.APIOptions...)
	iamEndpoint := cfg.IAMEndpoint
	if iamEndpoint == "" {
		iamEndpoint = cfg.BaseEndpoint
	}
	c.IAMAPI = newIAM(awsCfg, iamEndpoint)
	if cfg.SQSEndpoint != "" {
		c.SQSAPI = newSQS(awsCfg, cfg.SQSEndpoint)
	}
	return c, nil
}

// newSQS returns an SQS client. It is a client of its own, so it has its
// own retryer and retry quota: a throttled queue cannot use up the EC2
// client's retries.
func newSQS(awsCfg aws.Config, endpoint string) *sqs.Client {
	return sqs.NewFromConfig(awsCfg, func(o *sqs.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
}

func newIAM(awsCfg aws.Config, endpoint string) *iam.Client {
	return iam.NewFromConfig(awsCfg, func(o *iam.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
}

// NewFromConfig builds a Client from an already loaded aws.Config. A
// non-empty ec2Endpoint overrides the EC2 endpoint; a non-empty ssmEndpoint
// (or, when empty, ec2Endpoint) overrides the SSM endpoint; IAM and SQS
// requests go to ec2Endpoint when it is set, else to AWS's endpoints.
// apiOptions go on the EC2 and SSM clients' stacks (see Config.APIOptions),
// after launchIssued on the EC2 client's.
func NewFromConfig(awsCfg aws.Config, ec2Endpoint, ssmEndpoint string, apiOptions ...func(*middleware.Stack) error) *Client {
	if ssmEndpoint == "" {
		ssmEndpoint = ec2Endpoint
	}
	return &Client{
		EC2API: ec2.NewFromConfig(awsCfg, func(o *ec2.Options) {
			if ec2Endpoint != "" {
				o.BaseEndpoint = aws.String(ec2Endpoint)
			}
			o.APIOptions = append(append(o.APIOptions, addLaunchIssued), apiOptions...)
		}),
		SSMAPI: ssm.NewFromConfig(awsCfg, func(o *ssm.Options) {
			if ssmEndpoint != "" {
				o.BaseEndpoint = aws.String(ssmEndpoint)
			}
			o.APIOptions = append(o.APIOptions, apiOptions...)
		}),
		IAMAPI: newIAM(awsCfg, ec2Endpoint),
		SQSAPI: newSQS(awsCfg, ec2Endpoint),
	}
}

// launchIssuedID is launchIssued's ID on the EC2 client's stack.
const launchIssuedID = "karpx.launchlatency.Issued"

// launchIssued marks, for package launchlatency, the launches a CreateFleet
// call's context carries as issued: provisioning latency ends as the call
// enters the EC2 client, before the request budget may hold it.
var launchIssued = middleware.InitializeMiddlewareFunc(launchIssuedID, func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	if middleware.GetOperationName(ctx) == "CreateFleet" {
		launchlatency.Issued(ctx)
	}
	return next.HandleInitialize(ctx, in)
})

// addLaunchIssued puts launchIssued first in the Initialize step, so it
// runs before every middleware of Config.APIOptions (the budget's
// admission may wait for a token there).
func addLaunchIssued(stack *middleware.Stack) error {
	return stack.Initialize.Add(launchIssued, middleware.Before)
}
