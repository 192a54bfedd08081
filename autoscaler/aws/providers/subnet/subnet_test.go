package subnet

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
)

func names(fs []ec2types.Filter) []string {
	var out []string
	for _, f := range fs {
		out = append(out, aws.ToString(f.Name)+"="+f.Values[0])
	}
	return out
}

func TestFilters(t *testing.T) {
	got := names(Filters(v1.SubnetSelectorTerm{ID: "subnet-1", Tags: map[string]string{"karpenter.sh/discovery": "c", "kubernetes.io/role/internal-elb": "*"}}))
	want := []string{"subnet-id=subnet-1", "tag:karpenter.sh/discovery=c", "tag-key=kubernetes.io/role/internal-elb"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if len(Filters(v1.SubnetSelectorTerm{})) != 0 {
		t.Fatal("empty term must have no filters")
	}
}

// fakeAPI returns subnets per subnet-id filter and counts calls.
type fakeAPI struct {
	ec2api.API
	subnets map[string]ec2types.Subnet
	calls   int
}

func (f *fakeAPI) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	f.calls++
	out := &ec2.DescribeSubnetsOutput{}
	for _, flt := range in.Filters {
		if aws.ToString(flt.Name) == "subnet-id" {
			if s, ok := f.subnets[flt.Values[0]]; ok {
				out.Subnets = append(out.Subnets, s)
			}
		}
	}
	return out, nil
}

func TestListUnionsTermsAndCaches(t *testing.T) {
	api := &fakeAPI{subnets: map[string]ec2types.Subnet{
		"subnet-b": {SubnetId: aws.String("subnet-b"), AvailabilityZone: aws.String("us-east-1b")},
		"subnet-a": {SubnetId: aws.String("subnet-a"), AvailabilityZone: aws.String("us-east-1a")},
	}}
	p := NewProvider(api, cache.DefaultTTLs())
	terms := []v1.SubnetSelectorTerm{{ID: "subnet-b"}, {ID: "subnet-a"}, {ID: "subnet-a"}, {}}
	got, err := p.List(context.Background(), terms)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "subnet-a" || got[1].ID != "subnet-b" {
		t.Fatalf("got %+v", got)
	}
	if z := Zones(got); len(z) != 2 || z[0] != "us-east-1a" {
		t.Fatalf("zones %v", z)
	}
	if api.calls != 3 {
		t.Fatalf("calls %d, want 3 (one per non-empty term)", api.calls)
	}
	if _, err := p.List(context.Background(), terms); err != nil || api.calls != 3 {
		t.Fatalf("second List not cached: %v, %d", err, api.calls)
	}
}
