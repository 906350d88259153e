package throttle

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Why an adaptive bucket's rate last moved (AdaptState.Reason).
const (
	adaptCeiling  = "ceiling"  // never moved: the configured rate
	adaptCold     = "cold"     // no state: the upstream has not answered yet (or was forgotten)
	adaptRefused  = "429"      // lowered after the upstream refused a request
	adaptHeader   = "header"   // set from a quota the upstream announced
	adaptRecovery = "recovery" // raised back toward the ceiling after successes
)

// Adaptive is a token bucket whose rate the fleet learns from the upstream
// it protects: Ceiling is the configured limit, the most it ever grants; the
// effective rate, kept in the store beside the bucket and shared by every
// process, falls when the upstream refuses a request and climbs back while
// requests succeed, never below Floor. See docs/adaptive.md for the law.
//
// Pass it as the policy of Acquire, Reserve or TryAcquire: the same store
// call reads the effective rate and takes the tokens at it, so every
// process follows a change at its next call. Tell the store how the
// upstream answered with Limiter.Refused, Limiter.Succeeded and
// Limiter.Announced; Limiter.AdaptiveLimit reads the rate without taking
// anything. workers.Policy.Adapt and httplimit.Transport.Adapt do all of it.
type Adaptive struct {
	Ceiling Limit
	// Floor is the least effective rate, per Ceiling.Period; 0 means a tenth
	// of the ceiling.
	Floor float64
}

// The control law's constants (docs/adaptive.md).
const (
	// adaptBeta is the decrease after a refusal when the successes since the
	// last change do not measure what the upstream let through.
	adaptBeta = 0.6
	// adaptGamma is the increase per adaptStep of success while the rate is
	// under 80 % of the rate at the last measured refusal (or of the
	// ceiling): the upstream's limit has likely risen, climb fast.
	adaptGamma = 1.25
	// adaptAlpha is the increase per adaptStep above that, as a fraction of
	// the ceiling: probing near the last refusal, slowly.
	adaptAlpha = 0.005
	adaptStep  = time.Second
	// adaptHold is an overload episode: refusals within it of the first
	// lower the rate once, however many processes see them.
	adaptHold = time.Second
	// adaptQuiet is how long after a decrease the rate holds before it
	// climbs again.
	adaptQuiet = 2 * time.Second
	// adaptTTL forgets an idle bucket's learned rate: it starts again from
	// the ceiling.
	adaptTTL = time.Hour
)

// AdaptState is an adaptive bucket's effective rate, or an automatic
// in-flight bound (Limiter.InFlight).
type AdaptState struct {
	Rate   float64       // per Ceiling.Period; of an in-flight bound, the learned limit (fractional)
	Reason string        // why it last moved: ceiling, 429, header or recovery; cold if the upstream has not answered yet
	Age    time.Duration // since it last moved

	// Of an in-flight bound only (Limiter.InFlight); why it moved is cold,
	// slow-start, gradient, overload or probe.
	Bound    int           // the slots Hold grants now, fleet-wide
	Held     int           // the slots held now, fleet-wide
	Baseline time.Duration // the latency taken as the upstream's unloaded one
	Recent   time.Duration // the latest window's mean latency
}

// validate checks a as a Limit is checked, and its Floor.
func (a Adaptive) validate() error {
	if err := a.Ceiling.validate(); err != nil {
		return err
	}
	if a.Floor < 0 || math.IsNaN(a.Floor) || a.Floor > a.Ceiling.Rate {
		return invalidf("Adaptive: floor %g must be from 0 to the ceiling's rate %g", a.Floor, a.Ceiling.Rate)
	}
	return nil
}

func (a Adaptive) floor() float64 {
	if a.Floor > 0 {
		return a.Floor
	}
	return a.Ceiling.Rate / 10
}

func (a Adaptive) op(name string, n float64) adaptOp {
	period := a.Ceiling.Period
	if period == 0 {
		period = time.Second
	}
	return adaptOp{op: name, ceiling: a.Ceiling.Rate, floor: a.floor(), n: n,
		period: int64(period / time.Microsecond), hold: int64(adaptHold / time.Microsecond),
		step: int64(adaptStep / time.Microsecond), alpha: adaptAlpha, beta: adaptBeta, gamma: adaptGamma,
		ttlMillis: adaptTTL.Milliseconds(), quiet: int64(adaptQuiet / time.Microsecond)}
}

// answer is how an upstream answered one or more requests made under an
// adaptive bucket, for report.
type answer struct {
	// refused: the upstream refused a request for its rate (429, or 503 with
	// Retry-After).
	refused bool
	// succeeded counts requests it served.
	succeeded int
	// quota, if positive, is the rate the upstream announced (RateLimit
	// headers), per Ceiling.Period: the fleet adopts it, up to the ceiling.
	quota float64
}

// readAdaptive is AdaptiveLimit read from the store, never from the
// Limiter's last reading.
func (l *Limiter) readAdaptive(ctx context.Context, key string, a Adaptive) (Limit, AdaptState, error) {
	st, err := l.adapt(ctx, key, a, a.op("read", 0))
	if err != nil {
		return a.Ceiling, st, err
	}
	return a.limitAt(st.Rate), st, nil
}

// report tells the store how the upstream answered requests made under
// bucket key's adaptive limit a: a refusal lowers the effective rate (once
// per overload episode, for the whole fleet), successes raise it back toward
// the ceiling, an announced quota sets it. It returns the state after.
func (l *Limiter) report(ctx context.Context, key string, a Adaptive, ans answer) (AdaptState, error) {
	var st AdaptState
	var err error
	if ans.quota > 0 {
		if st, err = l.adapt(ctx, key, a, a.op("announce", ans.quota)); err != nil {
			return st, err
		}
	}
	if ans.refused {
		if st, err = l.adapt(ctx, key, a, a.op("refused", 0)); err != nil {
			return st, err
		}
	}
	if ans.succeeded > 0 {
		st, err = l.adapt(ctx, key, a, a.op("ok", float64(ans.succeeded)))
	}
	return st, err
}

func (l *Limiter) adapt(ctx context.Context, key string, a Adaptive, o adaptOp) (AdaptState, error) {
	if l.err != nil {
		return AdaptState{}, l.err
	}
	if err := checkName(key); err != nil {
		return AdaptState{}, err
	}
	if err := a.validate(); err != nil {
		return AdaptState{}, err
	}
	st, err := l.seam.adapt(ctx, l.cfg.prefix, key, o)
	if err != nil {
		return AdaptState{Rate: a.Ceiling.Rate, Reason: adaptCeiling}, fmt.Errorf("throttle: adaptive %s: %w", key, err)
	}
	return st, nil
}
