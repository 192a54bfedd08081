package operator

import (
	"context"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	awscloud "github.com/karpx/karpx/autoscaler/cloudprovider/aws"
	"github.com/karpx/karpx/autoscaler/providers/ec2api"
)

// NewAWSCloudProvider returns the factory of the EC2 CloudProvider for opts:
// the standard AWS credential chain and retryer, the regional endpoints or
// opts.EC2Endpoint / opts.SSMEndpoint, and EC2NodeClasses read through the
// manager's cached client. The factory fails only when the AWS shared
// configuration cannot be parsed or a required option is missing.
func NewAWSCloudProvider(opts Options) CloudProviderFactory {
	return func(ctx context.Context, kube client.Client) (cloudprovider.CloudProvider, error) {
		api, err := ec2api.New(ctx, ec2api.Config{
			Region:       opts.Region,
			BaseEndpoint: opts.EC2Endpoint,
			SSMEndpoint:  opts.SSMEndpoint,
		})
		if err != nil {
			return nil, err
		}
		return awscloud.New(awscloud.Options{
			ClusterName:       opts.ClusterName,
			ClusterEndpoint:   opts.ClusterEndpoint,
			ClusterCABundle:   opts.ClusterCABundle,
			KubernetesVersion: opts.KubernetesVersion,
			Region:            opts.Region,
			KubeClient:        kube,
			EC2API:            api,
			Logger:            logr.FromContextOrDiscard(ctx),
			DisableCaches:     !opts.EC2Caches,
		})
	}
}
