package throttle

import (
	"context"
	"sync"
	"time"
)

const (
	// AdapterCacheFor is how long an Adapter uses a bucket's effective limit
	// (Adapter.Limit) before it reads it again. Tokens are always taken at
	// the store's rate of the moment (an Adaptive policy); the cached copy
	// only answers checks that must not cost a store call each.
	AdapterCacheFor = 250 * time.Millisecond
	// adapterFlushAfter and adapterFlushEvery batch the successes an Adapter
	// reports: one store call per so many of a bucket, or per so long.
	adapterFlushAfter = 20
	adapterFlushEvery = 250 * time.Millisecond
	// adapterMaxKeys bounds an Adapter's per-bucket bookkeeping.
	adapterMaxKeys = 10_000
	// adapterCallTimeout bounds each store call an Adapter makes; callers
	// need no timer of their own for the calls it spares them.
	adapterCallTimeout = time.Second
)

// Adapter is one process's side of adaptive buckets (Adaptive), shared by
// its callers: it batches the successes it reports and caches each bucket's
// effective limit for AdapterCacheFor (for checks, and to spare the store
// announcements it already holds), so that adapting costs a store call per
// many requests, not per request. workers.Pool and httplimit.Transport
// use one each; a program of its own can too. It is safe for concurrent use.
type Adapter struct {
	lim *Limiter

	mu      sync.Mutex
	limits  map[string]adapterRead
	pending map[string]*adapterPending
}

type adapterRead struct {
	limit Limit
	st    AdaptState
	at    time.Time
}

type adapterPending struct {
	n     int
	since time.Time
}

// NewAdapter returns an Adapter over lim. Its methods make a store call
// only when their cache or batch says so, each bounded by a second and by
// the caller's context.
func NewAdapter(lim *Limiter) *Adapter {
	return &Adapter{lim: lim, limits: make(map[string]adapterRead), pending: make(map[string]*adapterPending)}
}

// Limit returns the limit to take bucket key's tokens under now: a's ceiling
// at the fleet's effective rate, read at most every AdapterCacheFor. If the
// store cannot say, it returns the ceiling and the error (the call that
// takes the tokens will meet the same outage).
func (ad *Adapter) Limit(ctx context.Context, key string, a Adaptive) (Limit, AdaptState, error) {
	now := time.Now()
	ad.mu.Lock()
	r, ok := ad.limits[key]
	ad.mu.Unlock()
	if ok && now.Sub(r.at) < AdapterCacheFor && r.limit.Period == a.Ceiling.Period {
		return a.limitAt(min(r.st.Rate, a.Ceiling.Rate)), r.st, nil
	}
	cctx, cancel := context.WithTimeout(ctx, adapterCallTimeout)
	defer cancel()
	l, st, err := ad.lim.AdaptiveLimit(cctx, key, a)
	if err != nil {
		return a.Ceiling, st, err
	}
	ad.mu.Lock()
	if len(ad.limits) >= adapterMaxKeys {
		clear(ad.limits)
	}
	ad.limits[key] = adapterRead{limit: l, st: st, at: now}
	ad.mu.Unlock()
	return l, st, nil
}

// Refused reports an upstream's refusal for bucket key at once, and whether
// it lowered the effective rate this process last read.
func (ad *Adapter) Refused(ctx context.Context, key string, a Adaptive) (st AdaptState, lowered bool, err error) {
	ad.mu.Lock()
	before, known := ad.limits[key]
	delete(ad.limits, key)
	ad.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, adapterCallTimeout)
	defer cancel()
	st, err = ad.lim.Report(cctx, key, a, Answer{Refused: true})
	return st, err == nil && (!known || st.Rate < before.st.Rate), err
}

// Succeeded counts a success for bucket key, and reports the count when it
// is large or old enough.
func (ad *Adapter) Succeeded(ctx context.Context, key string, a Adaptive) error {
	now := time.Now()
	ad.mu.Lock()
	p := ad.pending[key]
	if p == nil {
		if len(ad.pending) >= adapterMaxKeys {
			clear(ad.pending)
		}
		p = &adapterPending{since: now}
		ad.pending[key] = p
	}
	p.n++
	n := p.n
	if n < adapterFlushAfter && now.Sub(p.since) < adapterFlushEvery {
		ad.mu.Unlock()
		return nil
	}
	delete(ad.pending, key)
	ad.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, adapterCallTimeout)
	defer cancel()
	_, err := ad.lim.Report(cctx, key, a, Answer{Succeeded: n})
	return err
}

// Announced reports a quota the upstream announced for bucket key, as a rate
// per a.Ceiling.Period, unless the effective rate this process last read
// came from an announcement within 5 % of it (sparing the store a call per
// request); changed says whether it was reported and moved the rate.
func (ad *Adapter) Announced(ctx context.Context, key string, a Adaptive, rate float64) (st AdaptState, changed bool, err error) {
	ad.mu.Lock()
	cur, known := ad.limits[key]
	ad.mu.Unlock()
	if known && cur.st.Reason == adaptHeader && near(cur.st.Rate, min(rate, a.Ceiling.Rate), 0.05) {
		return cur.st, false, nil
	}
	cctx, cancel := context.WithTimeout(ctx, adapterCallTimeout)
	defer cancel()
	st, err = ad.lim.Report(cctx, key, a, Answer{Quota: rate})
	if err != nil {
		return st, false, err
	}
	ad.mu.Lock()
	delete(ad.limits, key)
	ad.mu.Unlock()
	return st, !known || !near(cur.st.Rate, st.Rate, 0.05), nil
}

// near reports whether a and b differ by at most frac of b.
func near(a, b, frac float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= frac*b
}
