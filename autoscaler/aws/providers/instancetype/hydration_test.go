package instancetype

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpx/karpx/autoscaler/aws/budget"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/hydration"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// catalogueAPI answers the catalogue calls with types (in one zone each),
// or with err; it counts calls and records priorities.
type catalogueAPI struct {
	ec2api.API
	mu         sync.Mutex
	types      []string
	err        error
	calls      int
	priorities []cloudprovider.Priority
}

func (c *catalogueAPI) DescribeInstanceTypeOfferings(ctx context.Context, _ *ec2.DescribeInstanceTypeOfferingsInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	c.priorities = append(c.priorities, cloudprovider.PriorityFrom(ctx))
	if c.err != nil {
		return nil, c.err
	}
	out := &ec2.DescribeInstanceTypeOfferingsOutput{}
	for _, t := range c.types {
		out.InstanceTypeOfferings = append(out.InstanceTypeOfferings, ec2types.InstanceTypeOffering{InstanceType: ec2types.InstanceType(t), Location: aws.String("us-east-1a")})
	}
	return out, nil
}

func (c *catalogueAPI) DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := &ec2.DescribeInstanceTypesOutput{}
	for _, t := range c.types {
		out.InstanceTypes = append(out.InstanceTypes, ec2types.InstanceTypeInfo{InstanceType: ec2types.InstanceType(t)})
	}
	return out, nil
}

func (c *catalogueAPI) DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	return &ec2.DescribeSpotPriceHistoryOutput{}, nil
}

func (c *catalogueAPI) set(types []string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.types, c.err = types, err
}

func names(t *testing.T, p *Provider) []string {
	t.Helper()
	its, err := p.List(context.Background(), []string{"us-east-1a"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range its {
		out = append(out, it.Name)
	}
	return out
}

func TestCatalogueNotHydratedIsTransient(t *testing.T) {
	api := &catalogueAPI{err: errors.New("503 Unavailable")}
	reg := hydration.NewRegistry()
	p := NewProvider(api, NewUnavailableOfferings(), cache.DefaultTTLs(), Options{Registry: reg})
	_, err := p.List(context.Background(), []string{"us-east-1a"})
	if !hydration.IsNotHydrated(err) {
		t.Fatalf("List before hydration with EC2 failing: %v, want NotHydratedError", err)
	}
	if reg.Hydrated(hydration.InstanceTypes) {
		t.Error("registry says hydrated")
	}
	api.set([]string{"m5.large", "c5.large"}, nil)
	if got := names(t, p); len(got) != 2 {
		t.Fatalf("after recovery: %v", got)
	}
	st := reg.States()
	if !reg.Hydrated(hydration.InstanceTypes, hydration.Offerings) || st[0].Items == 0 || st[0].LastError != "" {
		t.Errorf("states %+v", st)
	}
}

// TestStaleCatalogueKeptOnFailureAndSuspectEmpty: a failed refresh and an
// empty answer after a non-empty one keep the last good copy; refreshes
// after hydration are Speculative.
func TestStaleCatalogueKeptOnFailureAndSuspectEmpty(t *testing.T) {
	api := &catalogueAPI{types: []string{"m5.large", "c5.large"}}
	reg := hydration.NewRegistry()
	ttls := cache.DefaultTTLs()
	ttls.InstanceTypes = time.Minute
	p := NewProvider(api, NewUnavailableOfferings(), ttls, Options{Registry: reg})
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p.clk = clk
	if got := names(t, p); len(got) != 2 {
		t.Fatal(got)
	}
	if api.priorities[0] == cloudprovider.PrioritySpeculative {
		t.Error("first load ran Speculative; it must not be refused by the budget")
	}
	for i, tc := range []struct {
		types []string
		err   error
	}{{nil, errors.New("InternalError")}, {[]string{}, nil}} {
		api.set(tc.types, tc.err)
		clk.Step(2 * time.Minute)
		if got := names(t, p); len(got) != 2 {
			t.Errorf("case %d: %v, want the last good 2 types", i, got)
		}
		if pr := api.priorities[len(api.priorities)-1]; pr != cloudprovider.PrioritySpeculative {
			t.Errorf("case %d: refresh at %v, want Speculative", i, pr)
		}
		if st := reg.States(); st[0].Items != 2 || st[0].LastError == "" {
			t.Errorf("case %d: state %+v", i, st[0])
		}
	}
	api.set([]string{"m5.large"}, nil)
	clk.Step(2 * time.Minute)
	if got := names(t, p); len(got) != 1 {
		t.Errorf("a good non-empty answer replaces the copy: %v", got)
	}
}

// pagedSpotAPI serves 3 pages of spot prices; refuse makes the budget
// refuse page refuseAt.
type pagedSpotAPI struct {
	ec2api.API
	refuseAt int // page index to refuse (-1: none)
	pages    []int
}

func (s *pagedSpotAPI) DescribeSpotPriceHistory(_ context.Context, in *ec2.DescribeSpotPriceHistoryInput, _ ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	page := 0
	if in.NextToken != nil {
		page, _ = strconv.Atoi(*in.NextToken)
	}
	if page == s.refuseAt {
		s.refuseAt = -1
		return nil, &budget.ExhaustedError{Action: "DescribeSpotPriceHistory", Priority: cloudprovider.PrioritySpeculative}
	}
	s.pages = append(s.pages, page)
	out := &ec2.DescribeSpotPriceHistoryOutput{SpotPriceHistory: []ec2types.SpotPrice{{
		InstanceType: ec2types.InstanceType("m5.large"), AvailabilityZone: aws.String("us-east-1" + string(rune('a'+page))),
		SpotPrice: aws.String("0.03"), Timestamp: aws.Time(time.Now()),
	}}}
	if page < 2 {
		out.NextToken = aws.String(strconv.Itoa(page + 1))
	}
	return out, nil
}

// TestRefusedSpotRefreshResumes: a refresh the budget refuses on page 2
// resumes from page 2, not page 1, and nothing waits behind it.
func TestRefusedSpotRefreshResumes(t *testing.T) {
	api := &pagedSpotAPI{refuseAt: 1}
	p := NewProvider(api, NewUnavailableOfferings(), cache.DefaultTTLs())
	first, _ := p.spotPrices(context.Background())
	if len(first) != 0 {
		t.Fatalf("refused before any complete answer: %v, want none (on-demand fallback)", first)
	}
	second, _ := p.spotPrices(context.Background())
	if len(second) != 3 {
		t.Fatalf("after resuming: %v", second)
	}
	if want := []int{0, 1, 2}; len(api.pages) != 3 || api.pages[0] != 0 || api.pages[1] != 1 || api.pages[2] != 2 {
		t.Errorf("pages read %v, want %v (page 1 read once)", api.pages, want)
	}
	// A refresh in progress elsewhere: the caller does not wait.
	p.spotMu.Lock()
	p.stateMu.Lock()
	p.spotAt = time.Time{}
	p.stateMu.Unlock()
	done := make(chan map[string]float64, 1)
	go func() { m, _ := p.spotPrices(context.Background()); done <- m }()
	select {
	case m := <-done:
		if len(m) != 3 {
			t.Errorf("during another refresh: %v, want the last prices", m)
		}
	case <-time.After(5 * time.Second):
		t.Error("spotPrices waited behind a refresh in progress")
	}
	p.spotMu.Unlock()
}
