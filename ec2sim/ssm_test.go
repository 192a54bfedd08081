package ec2sim

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

func TestSSMAliasesResolveToKnownImages(t *testing.T) {
	env := newTestEnv(t, Config{Parameters: map[string]string{"/karpx/custom": "value"}})
	ctx := context.Background()
	for _, tc := range []struct{ path, arch, nameHas string }{
		{"/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/recommended/image_id", "x86_64", "amazon-eks-node-al2023-x86_64-standard-1.35-v"},
		{"/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/arm64/standard/recommended/image_id", "arm64", "al2023-arm64-standard-1.35"},
		{"/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/nvidia/recommended/image_id", "x86_64", "amazon-eks-node-al2023-x86_64-nvidia-1.35-v20251101"},
		{"/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/arm64/nvidia/recommended/image_id", "arm64", "al2023-arm64-nvidia-1.35"},
		{"/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/neuron/recommended/image_id", "x86_64", "al2023-x86_64-neuron-1.35"},
		{"/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.35-v20240807/image_id", "x86_64", "standard-1.35-v20240807"},
		{"/aws/service/eks/optimized-ami/1.35/amazon-linux-2/recommended/image_id", "x86_64", "amazon-eks-node-1.35-v"},
		{"/aws/service/eks/optimized-ami/1.35/amazon-linux-2-arm64/recommended/image_id", "arm64", "amazon-eks-arm64-node-1.35-v"},
		{"/aws/service/eks/optimized-ami/1.35/amazon-linux-2-gpu/recommended/image_id", "x86_64", "amazon-eks-gpu-node-1.35-v"},
		{"/aws/service/bottlerocket/aws-k8s-1.35/x86_64/latest/image_id", "x86_64", "bottlerocket-aws-k8s-1.35-x86_64-v"},
		{"/aws/service/bottlerocket/aws-k8s-1.35/arm64/latest/image_id", "arm64", "bottlerocket-aws-k8s-1.35-aarch64-v"},
		{"/aws/service/bottlerocket/aws-k8s-1.35-nvidia/x86_64/latest/image_id", "x86_64", "bottlerocket-aws-k8s-1.35-nvidia-x86_64-v"},
		{"/aws/service/bottlerocket/aws-k8s-1.35-nvidia/arm64/1.20.3/image_id", "arm64", "bottlerocket-aws-k8s-1.35-nvidia-aarch64-v1.20.3"},
		// Any Kubernetes version works; its AMIs are created on first use.
		{"/aws/service/eks/optimized-ami/1.29/amazon-linux-2023/x86_64/standard/recommended/image_id", "x86_64", "standard-1.29-"},
		{"/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.35/image_id", "x86_64", "Windows_Server-2022"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			p, err := env.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(tc.path)})
			if err != nil {
				t.Fatal(err)
			}
			id := *p.Parameter.Value
			if *p.Parameter.Name != tc.path || p.Parameter.Version != 1 || !strings.HasPrefix(id, "ami-") {
				t.Fatalf("parameter %+v", p.Parameter)
			}
			imgs, err := env.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
			if err != nil {
				t.Fatal(err)
			}
			img := imgs.Images[0]
			if string(img.Architecture) != tc.arch || !strings.Contains(*img.Name, tc.nameHas) || img.State != types.ImageStateAvailable {
				t.Fatalf("image %s %s %s", *img.Name, img.Architecture, img.State)
			}
			again, _ := env.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(tc.path)})
			if *again.Parameter.Value != id {
				t.Fatal("alias is not stable")
			}
		})
	}
	p, err := env.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/karpx/custom")})
	if err != nil || *p.Parameter.Value != "value" {
		t.Fatalf("custom parameter: %v", err)
	}

	// Owner and filter selection, as EC2NodeClass amiSelectorTerms use them.
	imgs, err := env.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"amazon"},
		Filters: []types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-*-standard-1.35-*"}},
			{Name: aws.String("architecture"), Values: []string{"arm64"}}}})
	if err != nil || len(imgs.Images) != 1 || *imgs.Images[0].Name != "amazon-eks-node-al2023-arm64-standard-1.35-v20251101" {
		t.Fatalf("name filter: %v %+v", err, imgs)
	}
	self, err := env.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"self"}})
	if err != nil || len(self.Images) != 0 {
		t.Fatalf("self-owned images: %v %d", err, len(self.Images))
	}
}
