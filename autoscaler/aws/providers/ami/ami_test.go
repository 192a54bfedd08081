package ami

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/catalog"
)

// fakeAPI answers GetParameter from params and DescribeImages (image-id
// filter only) from images; every other method panics via the nil interface.
type fakeAPI struct {
	ec2api.API
	params     map[string]string
	images     map[string]ec2types.Image
	ssmCalls   int
	imageCalls int
}

func (f *fakeAPI) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	f.ssmCalls++
	v, ok := f.params[aws.ToString(in.Name)]
	if !ok {
		return nil, &smithy.GenericAPIError{Code: ec2api.CodeParameterNotFound}
	}
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Value: aws.String(v)}}, nil
}

func (f *fakeAPI) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	f.imageCalls++
	out := &ec2.DescribeImagesOutput{}
	for _, flt := range in.Filters {
		if aws.ToString(flt.Name) != "image-id" {
			continue
		}
		for _, id := range flt.Values {
			if img, ok := f.images[id]; ok {
				out.Images = append(out.Images, img)
			}
		}
	}
	return out, nil
}

func image(id, name, arch string, created time.Time) ec2types.Image {
	return ec2types.Image{ImageId: aws.String(id), Name: aws.String(name), Architecture: ec2types.ArchitectureValues(arch), CreationDate: aws.String(created.Format(time.RFC3339))}
}

// al2023 seeds the four AL2023 AMIs of one alias: x86/arm × standard/nvidia.
func al2023() *fakeAPI {
	now := time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC)
	p := "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/"
	return &fakeAPI{
		params: map[string]string{
			p + "x86_64/standard/recommended/image_id": "ami-x86std",
			p + "x86_64/nvidia/recommended/image_id":   "ami-x86gpu",
			p + "arm64/standard/recommended/image_id":  "ami-armstd",
			p + "arm64/nvidia/recommended/image_id":    "ami-armgpu",
		},
		images: map[string]ec2types.Image{
			// Names deliberately unhelpful: variants must come from SSM.
			"ami-x86std": image("ami-x86std", "a", "x86_64", now),
			"ami-x86gpu": image("ami-x86gpu", "b", "x86_64", now.Add(time.Hour)),
			"ami-armstd": image("ami-armstd", "c", "arm64", now),
			"ami-armgpu": image("ami-armgpu", "d", "arm64", now.Add(-time.Hour)),
		},
	}
}

func TestAliasResolvesFourVariantsAndEachTypeGetsItsAMI(t *testing.T) {
	api := al2023()
	p := NewProvider(api, "", cache.DefaultTTLs())
	amis, err := p.List(context.Background(), []v1.AMISelectorTerm{{Alias: "al2023@latest"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(amis) != 4 {
		t.Fatalf("got %d AMIs, want 4: %+v", len(amis), amis)
	}
	// Every permutation of the AMI list must give the same answer: the
	// choice may not depend on DescribeImages order (issue #7925).
	for _, order := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}} {
		perm := make([]AMI, 0, 4)
		for _, i := range order {
			perm = append(perm, amis[i])
		}
		for typ, want := range map[string]string{
			"m5.large":     "ami-x86std",
			"c7i.xlarge":   "ami-x86std",
			"g5.xlarge":    "ami-x86gpu",
			"p4d.24xlarge": "ami-x86gpu",
			"m6g.large":    "ami-armstd",
			"g5g.xlarge":   "ami-armgpu",
		} {
			it, ok := catalog.Get(typ)
			if !ok {
				t.Fatalf("%s not in catalogue", typ)
			}
			got, ok := Select(perm, it.Labels)
			if !ok || got.ID != want {
				t.Errorf("order %v: %s got %q (found %v), want %s", order, typ, got.ID, ok, want)
			}
		}
		// Neuron types have no neuron AMI in this alias: strict matching
		// leaves them without an AMI rather than booting the standard one.
		inf, _ := catalog.Get("inf2.xlarge")
		if got, ok := Select(perm, inf.Labels); ok {
			t.Errorf("inf2.xlarge got %s, want no AMI", got.ID)
		}
	}
	// Cached: a second List makes no call.
	s, d := api.ssmCalls, api.imageCalls
	if _, err := p.List(context.Background(), []v1.AMISelectorTerm{{Alias: "al2023@latest"}}); err != nil {
		t.Fatal(err)
	}
	if api.ssmCalls != s || api.imageCalls != d {
		t.Fatal("second List was not served from cache")
	}
}

func TestSelectPrefersNewestAmongEqualFits(t *testing.T) {
	old := AMI{ID: "ami-old", Arch: "amd64", CreationDate: time.Unix(1, 0), Requirements: Requirements("amd64", VariantUnknown)}
	newer := AMI{ID: "ami-new", Arch: "amd64", CreationDate: time.Unix(2, 0), Requirements: Requirements("amd64", VariantUnknown)}
	dep := AMI{ID: "ami-dep", Arch: "amd64", CreationDate: time.Unix(3, 0), Deprecated: true, Requirements: Requirements("amd64", VariantUnknown)}
	m5, _ := catalog.Get("m5.large")
	if got, _ := Select([]AMI{old, dep, newer}, m5.Labels); got.ID != "ami-new" {
		t.Fatalf("got %s", got.ID)
	}
	// A variant-specific AMI beats an arch-only one for the type it fits.
	std := AMI{ID: "ami-std", Arch: "amd64", Requirements: Requirements("amd64", VariantStandard)}
	if got, _ := Select([]AMI{newer, std}, m5.Labels); got.ID != "ami-std" {
		t.Fatalf("got %s", got.ID)
	}
}

func TestAliasParameters(t *testing.T) {
	params, err := AliasParameters(v1.AMIFamilyAL2023, "latest", "1.35")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range params {
		names = append(names, p.Name)
	}
	for _, want := range []string{
		"/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/recommended/image_id",
		"/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
		"/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/arm64/standard/recommended/image_id",
		"/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/arm64/nvidia/recommended/image_id",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("missing %s in %v", want, names)
		}
	}
	params, _ = AliasParameters(v1.AMIFamilyAL2023, "v20251101", "1.35")
	if params[1].Name != "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/nvidia/amazon-eks-node-al2023-x86_64-nvidia-1.35-v20251101/image_id" {
		t.Errorf("pinned AL2023: %s", params[1].Name)
	}
	params, _ = AliasParameters(v1.AMIFamilyBottlerocket, "latest", "1.35")
	if params[0].Name != "/aws/service/bottlerocket/aws-k8s-1.35/x86_64/latest/image_id" ||
		params[3].Name != "/aws/service/bottlerocket/aws-k8s-1.35-nvidia/arm64/latest/image_id" {
		t.Errorf("bottlerocket: %v", params)
	}
	params, _ = AliasParameters(v1.AMIFamilyBottlerocket, "v1.30.0", "1.35")
	if params[0].Name != "/aws/service/bottlerocket/aws-k8s-1.35/x86_64/1.30.0/image_id" {
		t.Errorf("pinned bottlerocket: %s", params[0].Name)
	}
	params, _ = AliasParameters(v1.AMIFamilyAL2, "latest", "1.35")
	if len(params) != 3 || params[2].Name != "/aws/service/eks/optimized-ami/1.35/amazon-linux-2-gpu/recommended/image_id" || len(params[2].Variants) != 2 {
		t.Errorf("al2: %+v", params)
	}
	if _, err := AliasParameters(v1.AMIFamilyWindows2022, "latest", "1.35"); err == nil {
		t.Error("windows alias must fail")
	}
}

func TestAliasWithoutParametersFails(t *testing.T) {
	p := NewProvider(&fakeAPI{}, "1.99", cache.DefaultTTLs())
	_, err := p.List(context.Background(), []v1.AMISelectorTerm{{Alias: "al2023@latest"}})
	if err == nil {
		t.Fatal("want error")
	}
	if _, err := p.List(context.Background(), []v1.AMISelectorTerm{{Alias: "nope@latest"}}); err == nil {
		t.Fatal("want error for unknown family")
	}
}

func TestVariantsFromName(t *testing.T) {
	for name, want := range map[string][]Variant{
		"amazon-eks-node-al2023-x86_64-nvidia-1.35-v20251101":   {VariantNvidia},
		"amazon-eks-node-al2023-x86_64-standard-1.35-v20251101": {VariantStandard},
		"amazon-eks-node-al2023-x86_64-neuron-1.35-v20251101":   {VariantNeuron},
		"amazon-eks-gpu-node-1.35-v20251101":                    {VariantNvidia, VariantNeuron},
		"bottlerocket-aws-k8s-1.35-nvidia-aarch64-v1.50.0":      {VariantNvidia},
		"bottlerocket-aws-k8s-1.35-x86_64-v1.50.0":              {VariantStandard},
		"my-golden-image": {VariantUnknown},
	} {
		if got := VariantsFromName(name); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

func TestDescribeImagesInput(t *testing.T) {
	in := describeImagesInput(v1.AMISelectorTerm{Name: "my-*", Tags: map[string]string{"team": "*"}})
	if !slices.Equal(in.Owners, []string{"self", "amazon"}) || len(in.Filters) != 2 ||
		aws.ToString(in.Filters[0].Name) != "name" || aws.ToString(in.Filters[1].Name) != "tag-key" {
		t.Fatalf("%+v", in)
	}
	in = describeImagesInput(v1.AMISelectorTerm{ID: "ami-1", Owner: "123456789012"})
	if !slices.Equal(in.Owners, []string{"123456789012"}) || aws.ToString(in.Filters[0].Name) != "image-id" {
		t.Fatalf("%+v", in)
	}
	if describeImagesInput(v1.AMISelectorTerm{}) != nil {
		t.Fatal("empty term must select nothing")
	}
}
