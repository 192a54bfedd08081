package launchtemplate

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
	"github.com/go-logr/logr"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
)

func template() Template {
	return Template{
		ImageID:             "ami-0123",
		SecurityGroupIDs:    []string{"sg-b", "sg-a"},
		UserData:            "#!/bin/bash\n",
		BlockDeviceMappings: DefaultBlockDeviceMappings(v1.AMIFamilyAL2023),
		MetadataOptions:     DefaultMetadataOptions(),
		InstanceProfile:     "KarpxNodeProfile",
		Tags:                map[string]string{"b": "2", "a": "1", "karpenter.k8s.aws/ec2nodeclass": "default"},
	}
}

func TestNameIsStable(t *testing.T) {
	// The golden value pins the encoding: changing Template's JSON shape
	// renames every template in every cluster (one new template per class,
	// old ones orphaned), so it must be a deliberate change.
	const golden = "karpx/demo/43db137b3667cf06"
	a := template()
	if got := Name("demo", a); got != golden {
		t.Errorf("Name = %s, want %s (encoding changed?)", got, golden)
	}
	b := template()
	b.SecurityGroupIDs = []string{"sg-a", "sg-b"}
	b.Tags = map[string]string{"karpenter.k8s.aws/ec2nodeclass": "default", "a": "1", "b": "2"}
	if Name("demo", a) != Name("demo", b) {
		t.Error("order of security groups or tags changed the name")
	}
	if a.SecurityGroupIDs[0] != "sg-b" {
		t.Error("Name modified its argument")
	}
	for _, mutate := range []func(*Template){
		func(t *Template) { t.ImageID = "ami-other" },
		func(t *Template) { t.UserData += "echo\n" },
		func(t *Template) { t.SecurityGroupIDs = []string{"sg-a"} },
		func(t *Template) { t.Tags["c"] = "3" },
		func(t *Template) { t.MetadataOptions.HTTPPutResponseHopLimit = aws.Int64(2) },
		func(t *Template) { t.BlockDeviceMappings[0].EBS.VolumeSize = aws.String("100Gi") },
		func(t *Template) { t.InstanceProfile = "other" },
	} {
		c := template()
		mutate(&c)
		if Name("demo", c) == Name("demo", a) {
			t.Errorf("content change kept the name %s", Name("demo", c))
		}
	}
	if Name("other", a) == Name("demo", a) {
		t.Error("cluster name not in the name")
	}
}

type fakeAPI struct {
	ec2api.API
	existing     map[string]bool
	creates      int
	describes    int
	lastCreate   *ec2.CreateLaunchTemplateInput
	raceOnCreate bool
}

func (f *fakeAPI) DescribeLaunchTemplates(_ context.Context, in *ec2.DescribeLaunchTemplatesInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	f.describes++
	if !f.existing[in.LaunchTemplateNames[0]] {
		return nil, &smithy.GenericAPIError{Code: ec2api.CodeLaunchTemplateNameNotFound}
	}
	return &ec2.DescribeLaunchTemplatesOutput{}, nil
}

func (f *fakeAPI) CreateLaunchTemplate(_ context.Context, in *ec2.CreateLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	f.creates++
	f.lastCreate = in
	if f.raceOnCreate {
		return nil, &smithy.GenericAPIError{Code: ec2api.CodeLaunchTemplateNameAlreadyExists}
	}
	f.existing[aws.ToString(in.LaunchTemplateName)] = true
	return &ec2.CreateLaunchTemplateOutput{}, nil
}

func TestEnsureCreatesOnceAndReuses(t *testing.T) {
	api := &fakeAPI{existing: map[string]bool{}}
	p := NewProvider(api, "demo", logr.Discard(), cache.DefaultTTLs())
	for range 10 {
		name, err := p.Ensure(context.Background(), template())
		if err != nil {
			t.Fatal(err)
		}
		if name != Name("demo", template()) {
			t.Fatalf("name %s", name)
		}
	}
	if api.creates != 1 || api.describes != 1 {
		t.Fatalf("creates=%d describes=%d, want 1 and 1", api.creates, api.describes)
	}
	d := api.lastCreate.LaunchTemplateData
	ud, _ := base64.StdEncoding.DecodeString(aws.ToString(d.UserData))
	if string(ud) != "#!/bin/bash\n" || aws.ToString(d.ImageId) != "ami-0123" ||
		aws.ToInt32(d.BlockDeviceMappings[0].Ebs.VolumeSize) != 20 || string(d.MetadataOptions.HttpTokens) != "required" ||
		aws.ToString(d.IamInstanceProfile.Name) != "KarpxNodeProfile" || len(d.SecurityGroupIds) != 2 {
		t.Fatalf("bad request data: %+v", d)
	}
	// A new provider (restart) finds the template and does not create it.
	p2 := NewProvider(api, "demo", logr.Discard(), cache.DefaultTTLs())
	if _, err := p2.Ensure(context.Background(), template()); err != nil || api.creates != 1 {
		t.Fatalf("restart recreated: %v creates=%d", err, api.creates)
	}
}

func TestEnsureAlreadyExistsIsSuccess(t *testing.T) {
	api := &fakeAPI{existing: map[string]bool{}, raceOnCreate: true}
	p := NewProvider(api, "demo", logr.Discard(), cache.DefaultTTLs())
	if _, err := p.Ensure(context.Background(), template()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ensure(context.Background(), template()); err != nil || api.creates != 1 {
		t.Fatalf("%v creates=%d", err, api.creates)
	}
}

func TestBadVolumeSize(t *testing.T) {
	tp := template()
	tp.BlockDeviceMappings[0].EBS.VolumeSize = aws.String("lots")
	p := NewProvider(&fakeAPI{existing: map[string]bool{}}, "demo", logr.Discard(), cache.DefaultTTLs())
	if _, err := p.Ensure(context.Background(), tp); err == nil {
		t.Fatal("want error")
	}
}
