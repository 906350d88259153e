package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// The worker's share of the fleet's history (internal/history, docs/control.md
// "History"): every --history-step, at the step's end, one point per type the
// worker applies a limit to, merged in Redis with the other workers' points of
// the same step; and the longest waits of the tenants whose jobs started.

const (
	// historyWriteTimeout bounds a step's writes: the sampler must not lag
	// a step behind a slow Redis.
	historyWriteTimeout = 2 * time.Second
	// historyMinStep and historyMaxStep bound --history-step.
	historyMinStep = time.Second
	historyMaxStep = 10 * time.Minute
)

// sampler writes the worker's points. Its run is one goroutine; the rest
// is for that goroutine only.
type sampler struct {
	ring   *history.Ring
	step   time.Duration
	pool   *workers.Pool
	lim    *throttle.Limiter
	rates  *rates
	types  func() []applied      // the limits applied now (runtimeLimits.current)
	qrdb   redis.UniversalClient // the queues' Redis
	queues []string
	log    *slog.Logger

	stats map[string]workers.Stats // StatsByPolicy at the last point
	runs  map[string]int64         // rates.runs at the last point
}

func newSampler(ring *history.Ring, pool *workers.Pool, lim *throttle.Limiter, r *rates, types func() []applied,
	qrdb redis.UniversalClient, queues []string, log *slog.Logger) *sampler {
	return &sampler{
		ring: ring, step: ring.Step(), pool: pool, lim: lim, rates: r, types: types, qrdb: qrdb, queues: queues, log: log,
		stats: pool.StatsByPolicy(), runs: r.runs(),
	}
}

// run writes a point at the end of each step, the steps aligned to
// multiples of the step since 1970 (so that every worker's point of a step
// lands in the same slot), until ctx ends; it then writes the step it is
// in, so far.
func (s *sampler) run(ctx context.Context) {
	for {
		next := stepStart(time.Now(), s.step).Add(s.step)
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			fctx, cancel := context.WithTimeout(context.Background(), time.Second)
			s.sample(fctx, stepStart(time.Now(), s.step))
			cancel()
			return
		case <-t.C:
			s.sample(ctx, next.Add(-s.step))
		}
	}
}

// stepStart is the start of the step t is in: a multiple of step since
// 1970, as the ring counts its steps (time.Truncate counts from year 1).
func stepStart(t time.Time, step time.Duration) time.Time {
	ms, st := t.UnixMilli(), step.Milliseconds()
	return time.UnixMilli(ms - ms%st)
}

// sample writes the point of the step that began at at: what happened
// since the last point, and the readings now. A write that fails is logged
// at debug and dropped; the next step's point does not carry it.
func (s *sampler) sample(ctx context.Context, at time.Time) {
	ctx, cancel := context.WithTimeout(ctx, historyWriteTimeout)
	defer cancel()
	stats, runs := s.pool.StatsByPolicy(), s.rates.runs()
	waiting := s.pool.WaitingByPolicy()
	limits := s.rates.limitsPerSecond()
	eff := s.effective(ctx)
	queued := 0
	ds, errs := queue.Depths(ctx, s.qrdb, s.queues)
	for _, d := range ds {
		queued += d.Queued()
	}
	for _, err := range errs {
		s.log.Debug("history: cannot read a queue's depth", "err", err)
	}
	waits := s.pool.TakeWaits()
	for _, a := range s.types() {
		typ := a.spec.Name
		now, was := stats[typ], s.stats[typ]
		p := history.Point{
			At:        at,
			Grants:    float64(max(runs[typ]-s.runs[typ], 0)),
			Done:      float64(max(now.Processed-was.Processed, 0)),
			Archived:  float64(max(now.Archived-was.Archived, 0)),
			Refused:   float64(max(now.Refused-was.Refused, 0)),
			Cooldowns: float64(max(now.Cooldowns-was.Cooldowns, 0)),
			Waiting:   float64(waiting[typ]),
			Queued:    float64(queued),
			Limit:     limits[typ],
			Effective: eff[typ],
			Workers:   1,
		}
		if err := s.ring.Add(ctx, typ, p); err != nil {
			s.log.Debug("history: point not written", "type", typ, "err", err)
		}
		if w := waits[typ]; len(w) > 0 {
			if err := s.ring.AddWaits(ctx, typ, at, w); err != nil {
				s.log.Debug("history: tenants' waits not written", "type", typ, "err", err)
			}
		}
	}
	s.stats, s.runs = stats, runs
}

// effective reads the effective rate per second of each adaptive limit
// with one bucket, by policy name.
func (s *sampler) effective(ctx context.Context) map[string]float64 {
	out := make(map[string]float64)
	for _, w := range s.rates.adaptives() {
		l, _, err := s.lim.AdaptiveLimit(ctx, w.bucket, w.a)
		if err != nil || l.Period <= 0 {
			continue
		}
		out[w.name] = l.Rate / l.Period.Seconds()
	}
	return out
}

// limitsPerSecond is, by policy name, the limit on each policy's rate over
// all its jobs, per second: its global bucket's with a key template and a
// global limit, else its first limit's (per key for a key template).
func (r *rates) limitsPerSecond() map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]float64, len(r.policies))
	for _, p := range r.policies {
		out[p.name] = p.rate / p.period.Seconds()
		if p.global > 0 {
			out[p.name] = p.global
		}
	}
	return out
}

// globalPerSecond is the rate per second of pol's global bucket; 0 without one.
func globalPerSecond(pol workers.Policy) float64 {
	if pol.Key == nil || pol.Global == nil {
		return 0
	}
	rate, period := rateOf(pol.Global)
	return rate / period.Seconds()
}
