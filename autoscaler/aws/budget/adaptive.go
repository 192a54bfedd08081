package budget

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// This file makes each client-side bucket adaptive. A fixed Fraction of
// AWS's documented rates cannot keep karpx from being throttled: EC2's
// buckets are shared by every client of the account and region (CI,
// Terraform, other controllers), and karpx cannot see how much of them the
// others use. A RequestLimitExceeded answer is the only signal EC2 gives, so
// a bucket that receives one slows down, multiplicatively, and comes back to
// its configured rate linearly over AdaptiveRecovery.
//
// Why not aws-sdk-go-v2's retry.AdaptiveMode: its client-side rate limiter
// is one token bucket per SDK client, for every operation of the client,
// while EC2 throttles each action in its own bucket, so a throttled CreateTags
// would slow DescribeInstances and the NodeClaim lifecycle's reads with it;
// it has no priorities (Critical termination calls would queue behind
// Speculative catalogue refreshes); and its state is unexported, so it can
// be neither shown in `kubectl karpx throttle` nor tested. The algorithm
// here is the same family (decrease on throttle, grow back with time), per
// action, in front of the SDK's standard retryer, which still retries.

// Defaults of the adaptive budget (Options.Adaptive*).
const (
	// DefaultAdaptiveDecrease is the factor a bucket's size and refill rate
	// are multiplied by when AWS throttles its action: half, as TCP's
	// congestion control and the SDK's adaptive mode (CUBIC's beta of 0.7
	// is gentler; EC2's buckets refill in seconds, so a faster retreat
	// costs little).
	DefaultAdaptiveDecrease = 0.5
	// DefaultAdaptiveMinFactor is the lowest share of the configured bucket
	// a bucket slows down to: 1/16, i.e. 0.31 CreateFleet calls per second
	// at the default fraction, still enough to launch.
	DefaultAdaptiveMinFactor = 1.0 / 16
	// DefaultAdaptiveHold is the time after a decrease during which more
	// throttled answers do not decrease again: answers to calls already in
	// flight report the same congestion.
	DefaultAdaptiveHold = time.Second
	// DefaultAdaptiveRecovery is the time a bucket takes to come back from
	// its last decrease to its configured rate, linearly, if AWS does not
	// throttle it again. EC2's mutating bucket refills from empty in 10 s
	// (50 tokens at 5/s); two minutes keep the average rate after a
	// throttle well below the rate that caused it.
	DefaultAdaptiveRecovery = 2 * time.Minute
	// DefaultAdaptiveStart is the factor a bucket starts at, growing to 1
	// over the recovery time, or sooner with unthrottled answers
	// (onAnswered): a client that has just started does not
	// know how much of the account's buckets its neighbours use, so, like
	// TCP's slow start, it begins below its configured share. Half of the
	// default fraction is a quarter of AWS's bucket, which fits beside
	// neighbours using up to 75% of it.
	DefaultAdaptiveStart = 0.5
	// AdaptiveAnswerCeiling is the highest factor a slow start reaches
	// through unthrottled answers alone (onAnswered); the rest of the way
	// to the configured share comes with time. An unthrottled answer shows
	// that AWS's bucket held a token for that call, not how much of the
	// bucket the account's other clients use: at the default fraction, 3/4
	// of the share is 37.5% of AWS's bucket, which fits beside neighbours
	// using up to 62.5% of it. With the whole share as ceiling, scenario P1
	// (neighbours using 60% of every bucket) took CreateTags to half of
	// AWS's bucket within seconds and was throttled (4 of 369 calls, above
	// the scenario's 1%).
	AdaptiveAnswerCeiling = 0.75
)

// adaptState is a bucket's adaptation, guarded by bucket.mu.
type adaptState struct {
	// factor is the current share of spec, in [minFactor, 1].
	factor float64
	// low is factor right after the last decrease.
	low float64
	// decreasedAt is the time of the last decrease, zero if none.
	decreasedAt time.Time
	// decreases counts decreases since the bucket was created.
	decreases int64
	// throttled is true once AWS throttled the bucket's action (before,
	// decreasedAt is the start of the slow start).
	throttled bool
	// grown is the factor the slow start earned from answers AWS gave
	// without throttling (onAnswered), on top of its growth with time;
	// unused once throttled.
	grown float64
}

// startAdaptation starts b at the start factor, growing from now.
func (b *bucket) startAdaptation(start float64, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.adapt = adaptState{factor: start, low: start, decreasedAt: now}
	b.applyLocked(now)
	// A new bucket is full at its starting size.
	size, _ := b.effectiveLocked()
	b.lim.SetBurstAt(now, int(size))
}

// onThrottled slows b down after AWS throttled its action at now: unless a
// decrease happened within the hold time, size and refill are multiplied
// by the decrease factor (not below the minimum) and the tokens left are
// dropped, since EC2's own bucket is empty. It reports whether b slowed
// down.
func (b *bucket) onThrottled(now time.Time) bool {
	if b.adaptOff {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recoverLocked(now)
	if b.adapt.throttled && now.Sub(b.adapt.decreasedAt) < b.adaptHold {
		return false
	}
	b.adapt.factor = max(b.adaptMin, b.adapt.factor*b.adaptDecrease)
	b.adapt.low = b.adapt.factor
	b.adapt.decreasedAt = now
	b.adapt.decreases++
	b.adapt.throttled = true
	b.applyLocked(now)
	if t := b.lim.TokensAt(now); t > 0 {
		b.lim.AllowN(now, int(math.Floor(t)))
	}
	return true
}

// onAnswered grows a bucket in its slow start after AWS answered one of
// its calls without throttling it at now, as TCP's slow start widens its
// window with every acknowledgement: each such answer adds 1/Size of the
// way from the start factor to the configured share, and the tokens the
// larger size makes room for, up to AdaptiveAnswerCeiling of the share
// (reached once half a configured bucket's worth of calls went through
// unthrottled); time takes it the rest of the way (the time-based growth
// alone takes AdaptiveRecovery, 2 minutes, during which a burst of
// launches right after the controller starts waited for a quarter of
// AWS's CreateFleet rate). A bucket AWS has throttled, or whose answers
// took it to the ceiling, or with adaptation off, is left alone: its
// recovery stays time-based.
func (b *bucket) onAnswered(now time.Time) {
	if b.adaptOff {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.adapt.throttled || b.adapt.factor >= 1 || b.adapt.low+b.adapt.grown >= AdaptiveAnswerCeiling {
		return
	}
	b.recoverLocked(now)
	before, _ := b.effectiveLocked()
	b.adapt.grown += (1 - b.adapt.low) / b.spec.Size
	b.recoverLocked(now)
	after, _ := b.effectiveLocked()
	if after <= before {
		return
	}
	b.setTokensLocked(now, min(after, b.lim.TokensAt(now)+after-before))
	b.scheduleLocked(now) // waiting calls may be served now
}

// setTokensLocked makes b's limiter hold tokens (rounded down, within its
// burst) at now, keeping its rate and burst: rate.Limiter has no way to
// add tokens, so a new one replaces it. b.mu is held.
func (b *bucket) setTokensLocked(now time.Time, tokens float64) {
	lim := rate.NewLimiter(b.lim.Limit(), b.lim.Burst())
	lim.AllowN(now, lim.Burst()-int(max(0, math.Floor(tokens))))
	b.lim = lim
}

// recoverLocked grows b's factor linearly from its last decrease back to 1
// over the recovery time. The growth is applied lazily, when b is next
// used or read, and rate.Limiter caps its tokens at the burst it had
// until then. A bucket found full therefore gets the tokens the larger
// size makes room for, since a bucket that has been growing all along
// refills faster than its size grows (CreateFleet at the defaults: 1.25
// tokens a second or more, against 0.1 more size a second), up to
// AdaptiveAnswerCeiling of the configured share: time shows nothing of
// what the account's other clients use, so beyond what answers could
// confirm the tokens come from refilling at the grown rate. Without the
// fill, a bucket idle through its slow start kept the tokens of its
// starting size (12 of CreateFleet's 25), and the first burst of
// launches after it waited for the rest; with a fill to the whole share,
// scenario P1 (neighbours using 60% of every bucket) was throttled on a
// CreateTags wave (4 answers of about 320, above its 1%).
func (b *bucket) recoverLocked(now time.Time) {
	if b.adapt.factor >= 1 {
		return
	}
	f := b.factorAtLocked(now)
	if f == b.adapt.factor {
		return
	}
	tokens := b.lim.TokensAt(now)
	full := tokens >= float64(b.lim.Burst())
	b.adapt.factor = f
	b.applyLocked(now)
	if fill := min(float64(b.lim.Burst()), math.Floor(b.spec.Size*AdaptiveAnswerCeiling)); full && fill > tokens {
		b.setTokensLocked(now, fill)
	}
}

// factorAtLocked returns the factor b's last decrease (or slow start) and
// the answers since give it at at: linear growth over the recovery time,
// or the answers' growth if further and not throttled since, at most 1.
func (b *bucket) factorAtLocked(at time.Time) float64 {
	if b.adaptRecovery <= 0 {
		return 1
	}
	f := b.adapt.low + (1-b.adapt.low)*at.Sub(b.adapt.decreasedAt).Seconds()/b.adaptRecovery.Seconds()
	if !b.adapt.throttled {
		// Answers and time do not add up: whichever took the
		// slow start further counts.
		f = max(f, min(AdaptiveAnswerCeiling, b.adapt.low+b.adapt.grown))
	}
	return min(1, f)
}

// applyLocked sets the limiter to spec scaled by the current factor, at
// now.
func (b *bucket) applyLocked(now time.Time) {
	size, refill := b.effectiveLocked()
	b.lim.SetLimitAt(now, rate.Limit(refill))
	b.lim.SetBurstAt(now, int(size))
}

// effectiveLocked returns the size (whole tokens, at least one) and refill
// rate b runs at now.
func (b *bucket) effectiveLocked() (size, refill float64) {
	return max(1, math.Floor(b.spec.Size*b.adapt.factor)), b.spec.RefillPerSecond * b.adapt.factor
}

// adaptation returns b's factor, effective size and refill, and number of
// decreases, recovered to now.
func (b *bucket) adaptation(now time.Time) (factor, size, refill float64, decreases int64, last time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recoverLocked(now)
	size, refill = b.effectiveLocked()
	if b.adapt.throttled {
		last = b.adapt.decreasedAt
	}
	return b.adapt.factor, size, refill, b.adapt.decreases, last
}
