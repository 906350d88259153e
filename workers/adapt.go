package workers

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

const (
	// adaptCacheFor is how long the pool uses an adaptive bucket's effective
	// limit before it reads it again: the fleet follows a change within it.
	adaptCacheFor = 250 * time.Millisecond
	// adaptFlushAfter and adaptFlushEvery batch the successes reported to
	// the store: one call per so many jobs of a bucket, or per so long.
	adaptFlushAfter = 20
	adaptFlushEvery = 250 * time.Millisecond
	// adaptMaxKeys bounds the pool's per-bucket adaptive bookkeeping.
	adaptMaxKeys = 10_000
)

// adapter is the pool's side of adaptive buckets (Policy.Adapt): the
// effective limits it read, and the successes it has yet to report.
type adapter struct {
	mu      sync.Mutex
	limits  map[string]adaptRead
	pending map[string]*adaptPending
}

type adaptRead struct {
	limit throttle.Limit
	st    throttle.AdaptState
	at    time.Time
}

type adaptPending struct {
	n     int
	since time.Time
}

func newAdapter() *adapter {
	return &adapter{limits: make(map[string]adaptRead), pending: make(map[string]*adaptPending)}
}

// effective sets job j's own bucket to its adaptive limit's effective rate,
// read from the store at most every adaptCacheFor. If the store cannot say,
// the bucket keeps the ceiling (and the store call that takes the tokens
// will meet the same outage).
func (p *Pool) effective(ctx context.Context, j *job) {
	a := j.pol.adaptive
	now := time.Now()
	p.adapt.mu.Lock()
	r, ok := p.adapt.limits[j.key]
	p.adapt.mu.Unlock()
	if !ok || now.Sub(r.at) >= adaptCacheFor || r.limit.Period != a.Ceiling.Period {
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		l, st, err := p.cfg.Limiter.AdaptiveLimit(sctx, j.key, *a)
		cancel()
		if err != nil {
			j.log.Debug("workers: cannot read the adaptive rate; using the ceiling", "err", err)
			return
		}
		r = adaptRead{limit: l, st: st, at: now}
		p.adapt.mu.Lock()
		if len(p.adapt.limits) >= adaptMaxKeys {
			clear(p.adapt.limits)
		}
		p.adapt.limits[j.key] = r
		p.adapt.mu.Unlock()
	}
	j.buckets[0].Limit = r.limit
}

// adaptRefused reports an upstream refusal of job j to its adaptive bucket:
// the fleet's effective rate falls, once per overload episode.
func (p *Pool) adaptRefused(ctx context.Context, j *job) {
	a := j.pol.adaptive
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	p.adapt.mu.Lock()
	before, known := p.adapt.limits[j.key]
	delete(p.adapt.limits, j.key)
	p.adapt.mu.Unlock()
	st, err := p.cfg.Limiter.Report(sctx, j.key, *a, throttle.Answer{Refused: true})
	if err != nil {
		j.log.Debug("workers: cannot report the refusal to the adaptive rate", "err", err)
		return
	}
	if !known || st.Rate < before.st.Rate {
		j.log.Info("workers: upstream refused: the fleet's effective rate for the bucket is lowered",
			"bucket", j.key, "rate", st.Rate, "ceiling", a.Ceiling.Rate, "per", a.Ceiling.Period.String(), "why", st.Reason)
	}
}

// adaptSucceeded counts a success of job j for its adaptive bucket, and
// reports the count when it is large or old enough.
func (p *Pool) adaptSucceeded(ctx context.Context, j *job) {
	now := time.Now()
	p.adapt.mu.Lock()
	pd := p.adapt.pending[j.key]
	if pd == nil {
		if len(p.adapt.pending) >= adaptMaxKeys {
			clear(p.adapt.pending)
		}
		pd = &adaptPending{since: now}
		p.adapt.pending[j.key] = pd
	}
	pd.n++
	n := pd.n
	if n < adaptFlushAfter && now.Sub(pd.since) < adaptFlushEvery {
		p.adapt.mu.Unlock()
		return
	}
	delete(p.adapt.pending, j.key)
	p.adapt.mu.Unlock()

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if _, err := p.cfg.Limiter.Report(sctx, j.key, *j.pol.adaptive, throttle.Answer{Succeeded: n}); err != nil {
		j.log.Debug("workers: cannot report successes to the adaptive rate", "err", err)
	}
}
