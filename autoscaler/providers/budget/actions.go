package budget

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// DescribeInstanceTypes implements ec2api.API.
func (a *API) DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	c, err := a.begin(ctx, actionDescribeInstanceTypes, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeInstanceTypes(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeInstanceTypeOfferings implements ec2api.API.
func (a *API) DescribeInstanceTypeOfferings(ctx context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	c, err := a.begin(ctx, actionDescribeInstanceTypeOfferings, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeInstanceTypeOfferings(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeAvailabilityZones implements ec2api.API.
func (a *API) DescribeAvailabilityZones(ctx context.Context, in *ec2.DescribeAvailabilityZonesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeAvailabilityZonesOutput, error) {
	c, err := a.begin(ctx, actionDescribeAvailabilityZones, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeAvailabilityZones(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeSubnets implements ec2api.API.
func (a *API) DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	c, err := a.begin(ctx, actionDescribeSubnets, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeSubnets(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeSecurityGroups implements ec2api.API. Calls without ids, names,
// filters and MaxResults are charged to the unfiltered bucket.
func (a *API) DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	c, err := a.begin(ctx, actionDescribeSecurityGroups, unfilteredDescribeSecurityGroups(in))
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeSecurityGroups(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeImages implements ec2api.API.
func (a *API) DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	c, err := a.begin(ctx, actionDescribeImages, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeImages(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// CreateLaunchTemplate implements ec2api.API.
func (a *API) CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, optFns ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	c, err := a.begin(ctx, actionCreateLaunchTemplate, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.CreateLaunchTemplate(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeLaunchTemplates implements ec2api.API.
func (a *API) DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	c, err := a.begin(ctx, actionDescribeLaunchTemplates, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeLaunchTemplates(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DeleteLaunchTemplate implements ec2api.API.
func (a *API) DeleteLaunchTemplate(ctx context.Context, in *ec2.DeleteLaunchTemplateInput, optFns ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	c, err := a.begin(ctx, actionDeleteLaunchTemplate, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DeleteLaunchTemplate(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// CreateFleet implements ec2api.API.
func (a *API) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, optFns ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	c, err := a.begin(ctx, actionCreateFleet, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.CreateFleet(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeInstances implements ec2api.API. Calls without ids, filters and
// MaxResults are charged to the unfiltered bucket.
func (a *API) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	c, err := a.begin(ctx, actionDescribeInstances, unfilteredDescribeInstances(in))
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeInstances(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// TerminateInstances implements ec2api.API.
func (a *API) TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, optFns ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	c, err := a.begin(ctx, actionTerminateInstances, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.TerminateInstances(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// CreateTags implements ec2api.API.
func (a *API) CreateTags(ctx context.Context, in *ec2.CreateTagsInput, optFns ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	c, err := a.begin(ctx, actionCreateTags, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.CreateTags(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// DescribeSpotPriceHistory implements ec2api.API.
func (a *API) DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	c, err := a.begin(ctx, actionDescribeSpotPriceHistory, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.DescribeSpotPriceHistory(ctx, in, c.ec2Opts(optFns)...)
	return out, c.end(err)
}

// GetParameter implements ec2api.API.
func (a *API) GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	c, err := a.begin(ctx, actionGetParameter, false)
	if err != nil {
		return nil, err
	}
	out, err := a.next.GetParameter(ctx, in, c.ssmOpts(optFns)...)
	return out, c.end(err)
}
