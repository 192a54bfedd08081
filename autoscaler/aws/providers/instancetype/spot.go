package instancetype

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/karpx/karpx/autoscaler/aws/budget"
	"github.com/karpx/karpx/autoscaler/aws/hydration"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// spotPages is a spot-price refresh in progress: the pages read so far and
// the token of the next one, so that a refresh the budget refused part-way
// resumes where it stopped instead of restarting from page 1.
type spotPages struct {
	input  ec2.DescribeSpotPriceHistoryInput
	token  *string
	prices map[string]float64
	newest map[string]time.Time
}

// spotPrices returns "type/zone" → current Linux spot price in USD/hour:
// the last complete answer while it is younger than ttls.SpotPrice, else
// after a refresh. A price refresh is speculative (it only re-ranks
// offerings), so it runs at Speculative priority; when the budget refuses
// it, or EC2 fails, the last prices (or, before any, none: offeringPrice
// falls back to on-demand prices) serve until the next try, which resumes
// from the page where this one stopped. It never waits behind another
// refresh, and never fails.
func (p *Provider) spotPrices(ctx context.Context) (map[string]float64, error) {
	p.stateMu.Lock()
	last, at := p.lastSpot, p.spotAt
	p.stateMu.Unlock()
	if !at.IsZero() && p.clk.Since(at) < p.ttls.SpotPrice {
		return last, nil
	}
	if !p.spotMu.TryLock() {
		return orEmpty(last), nil
	}
	defer p.spotMu.Unlock()
	if err := p.refreshSpot(cloudprovider.WithPriority(ctx, cloudprovider.PrioritySpeculative)); err != nil {
		p.opts.Registry.Failed(hydration.SpotPrices, err)
		if !budget.IsExhausted(err) {
			p.opts.Logger.Info("spot price refresh failed; serving the last prices", "transient", true, "error", err.Error())
		}
	}
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	return orEmpty(p.lastSpot), nil
}

func orEmpty(m map[string]float64) map[string]float64 {
	if m == nil {
		return map[string]float64{}
	}
	return m
}

// RefreshSpotPrices refreshes spot prices now (the Hydrator's Source); it
// returns the refresh's error, the last prices staying in use.
func (p *Provider) RefreshSpotPrices(ctx context.Context) error {
	p.spotMu.Lock()
	defer p.spotMu.Unlock()
	err := p.refreshSpot(cloudprovider.WithPriority(ctx, cloudprovider.PrioritySpeculative))
	if err != nil {
		p.opts.Registry.Failed(hydration.SpotPrices, err)
	}
	return err
}

// refreshSpot reads the remaining pages of the refresh in progress (or
// starts one); spotMu is held.
func (p *Provider) refreshSpot(ctx context.Context) error {
	pg := p.spotPages
	if pg == nil {
		pg = &spotPages{
			input:  ec2.DescribeSpotPriceHistoryInput{ProductDescriptions: []string{"Linux/UNIX"}, StartTime: aws.Time(p.clk.Now())},
			prices: map[string]float64{}, newest: map[string]time.Time{},
		}
		p.spotPages = pg
	}
	for {
		in := pg.input
		in.NextToken = pg.token
		out, err := p.api.DescribeSpotPriceHistory(ctx, &in)
		if err != nil {
			return fmt.Errorf("describing spot price history: %w", err)
		}
		for _, sp := range out.SpotPriceHistory {
			price, err := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
			if err != nil || price <= 0 {
				continue
			}
			key := string(sp.InstanceType) + "/" + aws.ToString(sp.AvailabilityZone)
			ts := aws.ToTime(sp.Timestamp)
			if _, seen := pg.prices[key]; !seen || ts.After(pg.newest[key]) {
				pg.prices[key], pg.newest[key] = price, ts
			}
		}
		pg.token = out.NextToken
		if aws.ToString(pg.token) == "" {
			break
		}
	}
	p.spotPages = nil
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if len(pg.prices) == 0 && len(p.lastSpot) > 0 {
		p.spotAt = p.clk.Now() // retry after a TTL, not on every call
		err := fmt.Errorf("suspect empty answer (%d spot prices before): kept the last prices", len(p.lastSpot))
		p.opts.Logger.Info("WARNING: spot price refresh returned no prices; keeping the last ones", "kept", len(p.lastSpot))
		return err
	}
	p.lastSpot, p.spotAt = pg.prices, p.clk.Now()
	p.opts.Registry.Succeeded(hydration.SpotPrices, len(pg.prices))
	return nil
}
