package instancetype

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpx/karpx/autoscaler/aws/budget"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
)

// spotAPI answers DescribeSpotPriceHistory with one price, or with the
// budget's refusal once exhausted is set; it records the call's priority.
type spotAPI struct {
	ec2api.API
	exhausted bool
	priority  budget.Priority
}

func (s *spotAPI) DescribeSpotPriceHistory(ctx context.Context, _ *ec2.DescribeSpotPriceHistoryInput, _ ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	s.priority = budget.PriorityFrom(ctx)
	if s.exhausted {
		return nil, &budget.ExhaustedError{Action: "DescribeSpotPriceHistory", Priority: budget.Speculative}
	}
	return &ec2.DescribeSpotPriceHistoryOutput{SpotPriceHistory: []ec2types.SpotPrice{{
		InstanceType: "m5.large", AvailabilityZone: aws.String("us-east-1a"), SpotPrice: aws.String("0.031"), Timestamp: aws.Time(time.Now()),
	}}}, nil
}

func TestSpotRefreshIsSpeculativeAndServesLastPricesWhenRefused(t *testing.T) {
	api := &spotAPI{}
	ttls := cache.DefaultTTLs()
	ttls.SpotPrice = 10 * time.Millisecond
	p := NewProvider(api, NewUnavailableOfferings(), ttls)

	first, err := p.spotPrices(context.Background())
	if err != nil || first["m5.large/us-east-1a"] != 0.031 {
		t.Fatalf("spotPrices = %v, %v", first, err)
	}
	if api.priority != budget.Speculative {
		t.Fatalf("spot refresh ran at priority %v, want Speculative", api.priority)
	}
	time.Sleep(20 * time.Millisecond) // let the cached answer expire
	api.exhausted = true
	again, err := p.spotPrices(context.Background())
	if err != nil || again["m5.large/us-east-1a"] != 0.031 {
		t.Fatalf("with the budget exhausted: %v, %v; want the last prices and no error", again, err)
	}
}
