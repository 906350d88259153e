package throttle

import (
	"context"
	"sync"
	"time"
)

// How a Limiter reports to adaptive buckets and reads them: it batches the
// successes it reports and keeps each bucket's effective limit for
// adaptCacheFor (for checks, and to spare the store announcements it
// already holds), so that adapting costs a store call per many requests,
// not per request. Each Limiter keeps its own; workers.Pool and
// httplimit.Transport report through theirs.

const (
	// adaptCacheFor is how long a Limiter uses a bucket's effective limit
	// (AdaptiveLimit) before it reads it again. Tokens are always taken at
	// the store's rate of the moment (an Adaptive policy); the cached copy
	// only answers checks that must not cost a store call each.
	adaptCacheFor = 250 * time.Millisecond
	// adaptFlushAfter and adaptFlushEvery batch the successes a Limiter
	// reports: one store call per so many of a bucket, or per so long.
	adaptFlushAfter = 20
	adaptFlushEvery = 250 * time.Millisecond
	// adaptMaxKeys bounds a Limiter's per-bucket bookkeeping.
	adaptMaxKeys = 10_000
	// adaptCallTimeout bounds each store call the reports make; callers
	// need no timer of their own for the calls it spares them.
	adaptCallTimeout = time.Second
)

// adaptBook is a Limiter's bookkeeping of adaptive buckets: the limits it
// read and the successes it has yet to report. Its zero value is empty.
type adaptBook struct {
	mu      sync.Mutex
	limits  map[string]adaptRead
	pending map[string]*adaptPending
}

type adaptRead struct {
	limit Limit
	st    AdaptState
	at    time.Time
}

type adaptPending struct {
	n     int
	since time.Time
}

// AdaptiveLimit returns the Limit that bucket key takes tokens under now: a's
// ceiling at the fleet's effective rate (its burst scaled with it), and that
// rate's state. It reads the store, taking nothing, at most every 250 ms for
// a bucket (in between it answers from its last reading, which Refused and
// Announced forget); each read is bounded by a second and by ctx. If the
// store cannot say, it returns the ceiling and the error (the call that
// takes the tokens will meet the same outage).
func (l *Limiter) AdaptiveLimit(ctx context.Context, key string, a Adaptive) (Limit, AdaptState, error) {
	now := time.Now()
	ad := &l.adapts
	ad.mu.Lock()
	r, ok := ad.limits[key]
	ad.mu.Unlock()
	// A cold reading is never answered from: the first answer (any
	// process's) ends it, and the cold start waits for exactly that.
	if ok && now.Sub(r.at) < adaptCacheFor && r.limit.Period == a.Ceiling.Period && r.st.Reason != adaptCold {
		return a.limitAt(min(r.st.Rate, a.Ceiling.Rate)), r.st, nil
	}
	cctx, cancel := context.WithTimeout(ctx, adaptCallTimeout)
	defer cancel()
	lim, st, err := l.readAdaptive(cctx, key, a)
	if err != nil {
		return a.Ceiling, st, err
	}
	ad.mu.Lock()
	if ad.limits == nil || len(ad.limits) >= adaptMaxKeys {
		ad.limits = make(map[string]adaptRead)
	}
	ad.limits[key] = adaptRead{limit: lim, st: st, at: now}
	ad.mu.Unlock()
	return lim, st, nil
}

// Refused reports an upstream's refusal (a 429, or a 503 with Retry-After)
// for adaptive bucket key at once: it lowers the fleet's effective rate,
// once per overload episode. It returns the state after, and whether this
// refusal lowered it or it is lower than the rate this Limiter last read
// (another refusal of the episode, which lowered it before this Limiter read
// it, is not one).
func (l *Limiter) Refused(ctx context.Context, key string, a Adaptive) (st AdaptState, lowered bool, err error) {
	ad := &l.adapts
	ad.mu.Lock()
	before, known := ad.limits[key]
	delete(ad.limits, key)
	ad.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, adaptCallTimeout)
	defer cancel()
	st, err = l.report(cctx, key, a, answer{refused: true})
	now := err == nil && st.Reason == adaptRefused && st.Age == 0 // this call moved it
	return st, now || (err == nil && known && st.Rate < before.st.Rate), err
}

// Succeeded counts a request the upstream served under adaptive bucket
// key; the successes raise the effective rate back toward the ceiling. They
// are reported in batches, when their count is large or old enough.
func (l *Limiter) Succeeded(ctx context.Context, key string, a Adaptive) error {
	now := time.Now()
	ad := &l.adapts
	ad.mu.Lock()
	p := ad.pending[key]
	if p == nil {
		if ad.pending == nil || len(ad.pending) >= adaptMaxKeys {
			ad.pending = make(map[string]*adaptPending)
		}
		p = &adaptPending{since: now}
		ad.pending[key] = p
	}
	p.n++
	n := p.n
	// The bucket's last reading was cold: this success is the first answer
	// the fleet waits for (the cold start's probe), reported at once.
	cold := ad.limits[key].st.Reason == adaptCold
	if !cold && n < adaptFlushAfter && now.Sub(p.since) < adaptFlushEvery {
		ad.mu.Unlock()
		return nil
	}
	delete(ad.pending, key)
	ad.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, adaptCallTimeout)
	defer cancel()
	_, err := l.report(cctx, key, a, answer{succeeded: n})
	if cold && err == nil {
		ad.mu.Lock()
		delete(ad.limits, key)
		ad.mu.Unlock()
	}
	return err
}

// Announced reports a quota the upstream announced (RateLimit headers) for
// adaptive bucket key, as a rate per a.Ceiling.Period: the fleet adopts it,
// up to the ceiling. It is not reported if the effective rate this Limiter
// last read came from an announcement within 5 % of it made less than
// 250 ms before (sparing the store a call per request); changed says
// whether it was reported and moved the rate.
func (l *Limiter) Announced(ctx context.Context, key string, a Adaptive, rate float64) (st AdaptState, changed bool, err error) {
	ad := &l.adapts
	ad.mu.Lock()
	cur, known := ad.limits[key]
	ad.mu.Unlock()
	// The same rate announced lately (its state moved less than a quarter
	// of a hold before this Limiter read it, at most adaptCacheFor ago)
	// is not reported again; one that stood longer is, so that the store
	// counts the hold from it: a rate confirmed holds against the lower
	// readings of the same quota (adapt.lua), instead of giving way to the
	// first of them a hold after it was first announced.
	if known && cur.st.Reason == adaptHeader && near(cur.st.Rate, min(rate, a.Ceiling.Rate), 0.05) && cur.st.Age < adaptHold/4 {
		return cur.st, false, nil
	}
	cctx, cancel := context.WithTimeout(ctx, adaptCallTimeout)
	defer cancel()
	st, err = l.report(cctx, key, a, answer{quota: rate})
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
