package launchtemplate

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
)

// Template is the content of a launch template. Every field is part of the
// name hash.
type Template struct {
	// ImageID is the AMI ID.
	ImageID string `json:"imageID"`
	// SecurityGroupIDs are attached to the primary network interface; sorted
	// by Name before hashing.
	SecurityGroupIDs []string `json:"securityGroupIDs"`
	// UserData is the plain (not base64) userData.
	UserData string `json:"userData"`
	// BlockDeviceMappings are the volumes; nil means none (the AMI's own).
	BlockDeviceMappings []*v1.BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	// MetadataOptions configure IMDS; nil means EC2's defaults.
	MetadataOptions *v1.MetadataOptions `json:"metadataOptions,omitempty"`
	// InstanceProfile is the IAM instance profile name; "" attaches none.
	InstanceProfile string `json:"instanceProfile,omitempty"`
	// Tags are put on the launch template itself.
	Tags map[string]string `json:"tags,omitempty"`
	// DetailedMonitoring enables 1-minute CloudWatch metrics.
	DetailedMonitoring bool `json:"detailedMonitoring,omitempty"`
	// AssociatePublicIPAddress overrides the subnet's public IP setting.
	AssociatePublicIPAddress *bool `json:"associatePublicIPAddress,omitempty"`
	// CapacityReservationID, when set, targets that capacity reservation
	// (CapacityReservationPreference capacity-reservations-only), as
	// Karpenter's launch templates for capacity type reserved do
	// (launchtemplate/types.go@v1.14.0).
	CapacityReservationID string `json:"capacityReservationID,omitempty"`
	// CapacityBlock marks the target as a Capacity Block
	// (InstanceMarketOptions.MarketType capacity-block).
	CapacityBlock bool `json:"capacityBlock,omitempty"`
	// NoReservations opts an on-demand or spot launch out of open
	// capacity reservations (CapacityReservationPreference none), as
	// Karpenter does with the ReservedCapacity gate on.
	NoReservations bool `json:"noReservations,omitempty"`
}

// Name returns the content-addressed name of t in cluster clusterName:
// "karpx/<cluster>/<16 hex digits>". It is stable across processes and
// releases as long as Template's JSON encoding is unchanged.
func Name(clusterName string, t Template) string {
	t.SecurityGroupIDs = append([]string(nil), t.SecurityGroupIDs...)
	sort.Strings(t.SecurityGroupIDs)
	// encoding/json sorts map keys and keeps struct field order, so the
	// encoding is canonical; Template has no value it could fail on.
	b, _ := json.Marshal(t)
	sum := sha256.Sum256(b)
	return fmt.Sprintf("karpx/%s/%s", clusterName, hex.EncodeToString(sum[:8]))
}

// Provider ensures launch templates exist. It is safe for concurrent use.
type Provider struct {
	api         ec2api.API
	clusterName string
	log         logr.Logger
	mu          sync.Mutex
	known       cache.Store[string, struct{}]
}

// NewProvider returns a Provider for the cluster clusterName.
func NewProvider(api ec2api.API, clusterName string, log logr.Logger, ttls cache.TTLs) *Provider {
	return &Provider{api: api, clusterName: clusterName, log: log,
		known: cache.New[string, struct{}](cache.LaunchTemplateEntries, ttls.Default)}
}

// Ensure returns the name of the launch template with content t, creating
// it if it does not exist. Errors are AWS API errors from
// DescribeLaunchTemplates or CreateLaunchTemplate (for example
// InvalidAMIID.* or InvalidParameterValue for a bad block device), wrapped.
func (p *Provider) Ensure(ctx context.Context, t Template) (string, error) {
	name := Name(p.clusterName, t)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known.Contains(name) {
		return name, nil
	}
	_, err := p.api.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	switch {
	case err == nil:
		p.known.Add(name, struct{}{})
		return name, nil
	case !ec2api.IsNotFound(ec2api.Code(err)):
		return "", fmt.Errorf("describing launch template %s: %w", name, err)
	}
	data, err := requestData(t)
	if err != nil {
		return "", err
	}
	_, err = p.api.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: data,
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeLaunchTemplate,
			Tags:         Tags(t.Tags),
		}},
	})
	if err != nil && !ec2api.IsAlreadyExists(ec2api.Code(err)) {
		return "", fmt.Errorf("creating launch template %s: %w", name, err)
	}
	if err == nil {
		p.log.Info("created launch template", "launchTemplate", name, "imageID", t.ImageID)
	}
	p.known.Add(name, struct{}{})
	return name, nil
}

// requestData converts t to the CreateLaunchTemplate payload.
func requestData(t Template) (*ec2types.RequestLaunchTemplateData, error) {
	d := &ec2types.RequestLaunchTemplateData{
		ImageId:    aws.String(t.ImageID),
		UserData:   aws.String(base64.StdEncoding.EncodeToString([]byte(t.UserData))),
		Monitoring: &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(t.DetailedMonitoring)},
	}
	if t.AssociatePublicIPAddress != nil {
		d.NetworkInterfaces = []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{
			DeviceIndex: aws.Int32(0), AssociatePublicIpAddress: t.AssociatePublicIPAddress, Groups: t.SecurityGroupIDs,
		}}
	} else {
		d.SecurityGroupIds = t.SecurityGroupIDs
	}
	switch {
	case t.CapacityReservationID != "":
		d.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
			CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(t.CapacityReservationID)},
		}
		if t.CapacityBlock {
			d.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
		}
	case t.NoReservations:
		d.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreferenceNone,
		}
	}
	if t.InstanceProfile != "" {
		d.IamInstanceProfile = &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(t.InstanceProfile)}
	}
	if m := t.MetadataOptions; m != nil {
		d.MetadataOptions = &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointState(aws.ToString(m.HTTPEndpoint)),
			HttpProtocolIpv6:        ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(aws.ToString(m.HTTPProtocolIPv6)),
			HttpTokens:              ec2types.LaunchTemplateHttpTokensState(aws.ToString(m.HTTPTokens)),
			HttpPutResponseHopLimit: int64To32(m.HTTPPutResponseHopLimit),
		}
	}
	for i, b := range t.BlockDeviceMappings {
		if b == nil || b.EBS == nil {
			continue
		}
		e := b.EBS
		ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{
			DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, KmsKeyId: e.KMSKeyID,
			SnapshotId: e.SnapshotID, Iops: int64To32(e.IOPS), Throughput: int64To32(e.Throughput),
			VolumeInitializationRate: e.VolumeInitializationRate, VolumeType: ec2types.VolumeType(aws.ToString(e.VolumeType)),
		}
		if e.VolumeSize != nil {
			q, err := resource.ParseQuantity(*e.VolumeSize)
			if err != nil {
				return nil, fmt.Errorf("spec.blockDeviceMappings[%d].ebs.volumeSize %q: %w", i, *e.VolumeSize, err)
			}
			gib := (q.Value() + (1<<30 - 1)) >> 30
			ebs.VolumeSize = aws.Int32(int32(gib))
		}
		d.BlockDeviceMappings = append(d.BlockDeviceMappings, ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: b.DeviceName, Ebs: ebs})
	}
	return d, nil
}

func int64To32(p *int64) *int32 {
	if p == nil {
		return nil
	}
	return aws.Int32(int32(*p))
}

// Tags converts a tag map to EC2 tags sorted by key.
func Tags(m map[string]string) []ec2types.Tag {
	keys := slices.Sorted(maps.Keys(m))
	tags := make([]ec2types.Tag, 0, len(keys))
	for _, k := range keys {
		tags = append(tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return tags
}

// DefaultBlockDeviceMappings returns the volumes of an AMI family when
// spec.blockDeviceMappings is empty: a 20 GiB encrypted gp3 root volume on
// /dev/xvda for AL2 and AL2023, and a 4 GiB OS volume plus a 20 GiB data
// volume (/dev/xvdb) for Bottlerocket. Source: Karpenter's amifamily
// defaults. Custom gets nil (the AMI's own mappings).
func DefaultBlockDeviceMappings(family string) []*v1.BlockDeviceMapping {
	ebs := func(size string) *v1.BlockDevice {
		return &v1.BlockDevice{Encrypted: aws.Bool(true), VolumeType: aws.String("gp3"), VolumeSize: aws.String(size), DeleteOnTermination: aws.Bool(true)}
	}
	switch family {
	case v1.AMIFamilyAL2, v1.AMIFamilyAL2023:
		return []*v1.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"), EBS: ebs("20Gi"), RootVolume: true}}
	case v1.AMIFamilyBottlerocket:
		return []*v1.BlockDeviceMapping{
			{DeviceName: aws.String("/dev/xvda"), EBS: ebs("4Gi")},
			{DeviceName: aws.String("/dev/xvdb"), EBS: ebs("20Gi"), RootVolume: true},
		}
	}
	return nil
}

// DefaultMetadataOptions are the IMDS settings when spec.metadataOptions is
// unset: endpoint enabled, IPv6 disabled, hop limit 1, IMDSv2 required.
// Source: the EC2NodeClass CRD default (Karpenter v1).
func DefaultMetadataOptions() *v1.MetadataOptions {
	return &v1.MetadataOptions{
		HTTPEndpoint: aws.String("enabled"), HTTPProtocolIPv6: aws.String("disabled"),
		HTTPPutResponseHopLimit: aws.Int64(1), HTTPTokens: aws.String("required"),
	}
}

// DeleteTagged deletes every launch template carrying all of tags (for
// example the cluster's ownership tag and an EC2NodeClass's name) and
// forgets the templates it knew, so that the next Ensure checks again. It
// returns how many it deleted; a template already gone counts as deleted.
// Errors are DescribeLaunchTemplates or DeleteLaunchTemplate failures.
func (p *Provider) DeleteTagged(ctx context.Context, tags map[string]string) (int, error) {
	in := &ec2.DescribeLaunchTemplatesInput{Filters: ec2api.TagFilters(tags)}
	var names []string
	pager := ec2.NewDescribeLaunchTemplatesPaginator(p.api, in)
	for pager.HasMorePages() {
		out, err := pager.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("describing launch templates: %w", err)
		}
		for _, lt := range out.LaunchTemplates {
			names = append(names, aws.ToString(lt.LaunchTemplateName))
		}
	}
	p.mu.Lock()
	p.known.Purge()
	p.mu.Unlock()
	deleted := 0
	for _, name := range names {
		_, err := p.api.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)})
		if err != nil && !ec2api.IsNotFound(ec2api.Code(err)) {
			return deleted, fmt.Errorf("deleting launch template %s: %w", name, err)
		}
		deleted++
		p.log.Info("deleted launch template", "launchTemplate", name)
	}
	return deleted, nil
}
