package throttle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// How a Limiter feeds an automatic in-flight bound (Concurrency.Auto): each
// Lease's sample (latency and outcome) goes into the Limiter's book when
// the Lease is released; the book reports a key's samples to the store at
// most every quarter window, or per flightFlushAfter samples, from the
// caller of Release that finds them due. The store sums the fleet's
// samples in one window; the report that finds the window due claims it,
// and its process runs the law (flight_law.go) and commits the result. A
// process that dies holding a claim loses that window's samples: the claim
// lapses after flightClaimTTL, and the next window is claimed as usual.

const (
	// flightFlushAfter bounds the samples a Limiter keeps for one key.
	flightFlushAfter = 64
	// flightMinClaim is the shortest claim: a claim outlives the commit's
	// call timeout (adaptCallTimeout), so that a slow commit is not taken over.
	flightMinClaim = 2 * time.Second
)

// flightBook is a Limiter's samples of automatic bounds, by semaphore key,
// and the state it last read of each. Its zero value is empty.
type flightBook struct {
	mu   sync.Mutex
	keys map[string]*flightPend
}

type flightPend struct {
	n, sum, over int64
	hist         map[int]int64
	since        time.Time
	flushing     bool
	bound        int // the bound last read, 0 if none
}

// lastBound is the bound this Limiter last read for key, or start.
func (b *flightBook) lastBound(key string, start int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.keys[key]; p != nil && p.bound > 0 {
		return p.bound
	}
	return start
}

// Observe reports how the work the lease guarded went, for an automatic
// bound (Concurrency.Auto): how long the upstream took to answer, and
// whether the answer said it was overloaded (a 503 or 429, a timeout),
// which lowers the bound. Release reports it with the fleet's samples;
// without Observe, Release reports the time from the grant to the release,
// served. The latest call counts. It does nothing for a fixed bound, and
// is safe for concurrent use.
func (l *Lease) Observe(latency time.Duration, overloaded bool) {
	if l.h == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.observed, l.latency, l.overloaded = true, max(latency, 0), overloaded
}

// sample is the lease's report to its automatic bound, taken once at its
// release. l.mu is held.
func (l *Lease) sample() (time.Duration, bool) {
	if l.observed {
		return l.latency, l.overloaded
	}
	return time.Since(l.granted), false
}

// observeFlight books one sample of h's automatic bound and reports the
// key's samples if they are due.
func (l *Limiter) observeFlight(ctx context.Context, h *holdCall, latency time.Duration, over bool) {
	b := &l.flights
	now := time.Now()
	b.mu.Lock()
	if b.keys == nil || len(b.keys) >= adaptMaxKeys {
		b.keys = make(map[string]*flightPend)
	}
	p := b.keys[h.key]
	if p == nil {
		p = &flightPend{since: now}
		b.keys[h.key] = p
	}
	if over {
		p.over++
	} else {
		us := int64(latency / time.Microsecond)
		p.n++
		p.sum += us
		if p.hist == nil {
			p.hist = make(map[int]int64)
		}
		p.hist[latBucket(us)]++
	}
	due := !p.flushing && (p.n+p.over >= flightFlushAfter || now.Sub(p.since) >= h.c.interval()/4 || over)
	if !due {
		b.mu.Unlock()
		return
	}
	o := flightOp{n: p.n, sum: p.sum, over: p.over, hist: p.hist}
	p.n, p.sum, p.over, p.hist, p.since, p.flushing = 0, 0, 0, nil, now, true
	b.mu.Unlock()

	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), adaptCallTimeout)
	defer cancel()
	bound, err := l.reportFlight(cctx, h.key, h.c, o)
	b.mu.Lock()
	p.flushing = false
	if err == nil {
		p.bound = bound
	}
	b.mu.Unlock()
	if err != nil {
		l.tel.storeError(ctx, "flight")
	}
}

// reportFlight reports o's samples of key's automatic bound c, runs the law
// if the report claimed the fleet's window, and returns the bound after.
func (l *Limiter) reportFlight(ctx context.Context, key string, c Concurrency, o flightOp) (int, error) {
	fs := l.store.(flightStore) // checkHold made sure
	iv := c.interval()
	o.interval = int64(iv / time.Microsecond)
	o.token = newLeaseID()
	o.claimTTL = int64(max(4*iv, flightMinClaim) / time.Microsecond)
	o.ttlMillis = adaptTTL.Milliseconds()
	o.minSamples = minSamples(l.flights.lastBound(key, c.floor()))
	r, err := fs.flight(ctx, l.cfg.prefix, key, o)
	if err != nil {
		return 0, err
	}
	p := c.params()
	st := r.st
	if !r.known {
		st = coldFlight(p, r.now)
	}
	if !r.claimed {
		return st.bound, nil
	}
	st.step(r.win, r.now, p, rand.Float64())
	if _, err := fs.flightCommit(ctx, l.cfg.prefix, key, o.token, st, o.ttlMillis); err != nil {
		return 0, err
	}
	return st.bound, nil
}

// params are c's bounds and window for the law.
func (c Concurrency) params() flightParams {
	return flightParams{floor: float64(c.floor()), ceiling: float64(c.ceiling()), interval: int64(c.interval() / time.Microsecond)}
}

// validateAuto checks an automatic bound's Floor and Interval.
func (c Concurrency) validateAuto() error {
	switch {
	case c.Floor < 0:
		return invalidf("floor %d must not be negative (0 means 1)", c.Floor)
	case c.Floor > c.ceiling():
		return invalidf("floor %d is above the ceiling %d", c.Floor, c.ceiling())
	case c.Interval < 0:
		return invalidf("interval %v must not be negative (0 means %v)", c.Interval, defaultInterval)
	case c.Interval != 0 && (c.Interval < minFlightInterval || c.Interval > maxFlightInterval):
		return invalidf("interval %v is not from %v to %v", c.Interval, minFlightInterval, maxFlightInterval)
	}
	return nil
}

// InFlight reads the semaphore key's automatic bound c (Concurrency.Auto)
// from the store, taking nothing: the bound Hold grants now, the learned
// limit (Rate), the slots held, the baseline and recent latency, and why
// and how long ago the bound last moved. It returns an error matching
// ErrInvalid for a c without Auto.
func (l *Limiter) InFlight(ctx context.Context, key string, c Concurrency) (AdaptState, error) {
	if l.err != nil {
		return AdaptState{}, l.err
	}
	if err := checkName(key); err != nil {
		return AdaptState{}, err
	}
	if !c.Auto {
		return AdaptState{}, invalidf("InFlight: %s is not an automatic bound", c.describe())
	}
	if err := c.Validate(); err != nil {
		return AdaptState{}, err
	}
	fs, ok := l.store.(flightStore)
	if !ok {
		return AdaptState{}, invalidf("store %T cannot keep an automatic bound", l.store)
	}
	r, err := fs.flight(ctx, l.cfg.prefix, key, flightOp{})
	if err != nil {
		return AdaptState{}, fmt.Errorf("throttle: in-flight %s: %w", key, err)
	}
	st := r.st
	if !r.known {
		st = coldFlight(c.params(), r.now)
	}
	return AdaptState{Rate: st.limit, Reason: st.why, Age: micros(max(r.now-st.at, 0)), Bound: min(st.bound, c.ceiling()),
		Held: r.held, Baseline: micros(int64(st.base)), Recent: micros(int64(st.recent))}, nil
}
