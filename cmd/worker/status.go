package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/limitspec"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// rates counts the handler runs of each limited job type, for the achieved
// rates of the status line: a handler runs once its job has its tokens, so
// runs per second is the rate the policy achieves. Counting is safe for
// concurrent use; snapshot and total are for one goroutine at a time.
type rates struct {
	start    time.Time
	mu       sync.Mutex    // guards each policy's rate and period, which runtime limits change
	policies []*policyRate // in the order of the limits
}

type policyRate struct {
	name   string
	rate   float64       // the limit's rate per period, as its spec writes it
	period time.Duration // never 0
	perKey bool          // the limit is per derived key (a key template): the rate is over all keys
	global float64       // the global bucket's rate per second with a key template; 0 without one
	runs   atomic.Int64

	// adaptive is the ceiling and floor of the limit's upstream's bucket
	// when it adapts and the fleet shares one (no key template, or the
	// global bucket of one: workers.UpstreamAdaptive); eff and why are its
	// effective rate and why it last moved, as last read (logStatus).
	adaptive *throttle.Adaptive
	bucket   string // that bucket's key, as workers.Pool names it
	eff      float64
	why      string

	// flightKey and flight are the policy's automatic in-flight bound, if it
	// has one and one semaphore (workers.InFlightOf); inflight describes it
	// as last read (readFlight).
	flightKey string
	flight    throttle.Concurrency
	inflight  string

	// fairBucket and fairGlobal are a fair limit's global bucket and its
	// limit ("" if not fair); tenants describes its keys as last read.
	fairBucket string
	fairGlobal throttle.Policy
	tenants    string

	// quota is the policy's calendar quota, if one of its limits is one (the
	// last read); parked says how many of its jobs are parked until its reset.
	quota  *throttle.FixedWindow
	parked string

	last   int64 // runs at the previous snapshot
	lastAt time.Time
}

func newRates(now time.Time) *rates { return &rates{start: now} }

// counted returns h counting its runs under the policy pol.
func (r *rates) counted(h asynq.Handler, pol *workers.Policy) asynq.Handler {
	first := firstLimit(*pol)
	rate, period := rateOf(first.Limit)
	pr := &policyRate{name: pol.Name, rate: rate, period: period, perKey: pol.Key != nil, global: globalPerSecond(*pol), lastAt: r.start}
	pr.adaptive, pr.bucket = adaptiveOf(*pol)
	pr.fairBucket, pr.fairGlobal = fairOf(*pol)
	pr.quota = quotaOf(*pol)
	pr.flightKey, pr.flight = autoFlightOf(*pol)
	r.policies = append(r.policies, pr)
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		pr.runs.Add(1)
		return h.ProcessTask(ctx, t)
	})
}

// setLimit changes the limit a policy's rate is shown against, when a
// runtime limit replaces it.
func (r *rates) setLimit(name string, pol workers.Policy) {
	first := firstLimit(pol)
	rate, period := rateOf(first.Limit)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.policies {
		if p.name == name {
			p.rate, p.period, p.perKey, p.global = rate, period, pol.Key != nil, globalPerSecond(pol)
			p.adaptive, p.bucket = adaptiveOf(pol)
			p.eff, p.why = 0, ""
			p.fairBucket, p.fairGlobal = fairOf(pol)
			p.tenants = ""
			p.quota, p.parked = quotaOf(pol), ""
			p.flightKey, p.flight = autoFlightOf(pol)
			p.inflight = ""
		}
	}
}

// adaptiveOf is pol's upstream's adaptive bucket and its limit, if pol
// adapts and the fleet shares one: its own bucket, or with a key template
// and a global limit the global one (workers.UpstreamAdaptive).
func adaptiveOf(pol workers.Policy) (*throttle.Adaptive, string) {
	key, a, ok := workers.UpstreamAdaptive(pol)
	if !ok {
		return nil, ""
	}
	return &a, key
}

// adaptiveWant is one adaptive limit with one bucket: its policy's name, its
// bucket, its ceiling and floor.
type adaptiveWant struct {
	p            *policyRate
	name, bucket string
	a            throttle.Adaptive
}

// adaptives lists the adaptive limits with one bucket.
func (r *rates) adaptives() []adaptiveWant {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []adaptiveWant
	for _, p := range r.policies {
		if p.adaptive != nil {
			out = append(out, adaptiveWant{p, p.name, p.bucket, *p.adaptive})
		}
	}
	return out
}

// readAdaptive reads the effective rate of each adaptive policy with one
// bucket, for the next snapshot.
func (r *rates) readAdaptive(ctx context.Context, lim *throttle.Limiter) {
	for _, w := range r.adaptives() {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, st, err := lim.AdaptiveLimit(cctx, w.bucket, w.a)
		cancel()
		r.mu.Lock()
		if err == nil {
			w.p.eff, w.p.why = st.Rate, st.Reason
		} else {
			w.p.eff, w.p.why = 0, ""
		}
		r.mu.Unlock()
	}
}

// runs returns the handler runs so far, by policy name.
func (r *rates) runs() map[string]int64 {
	out := make(map[string]int64, len(r.policies))
	for _, p := range r.policies {
		out[p.name] = p.runs.Load()
	}
	return out
}

// snapshot describes each policy's rate since the previous snapshot (or
// since start), "http:request 49.8/s of 50/s, email:send 98.0/m of 100/m",
// in the unit of its limit; a policy with a key per tenant says
// "export 120.0/s over all keys, 50/s per key".
func (r *rates) snapshot(now time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	parts := make([]string, 0, len(r.policies))
	for _, p := range r.policies {
		runs := p.runs.Load()
		parts = append(parts, p.describe(runs-p.last, now.Sub(p.lastAt)))
		p.last, p.lastAt = runs, now
	}
	return strings.Join(parts, ", ")
}

// total describes each policy's average rate since start.
func (r *rates) total(now time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	parts := make([]string, 0, len(r.policies))
	for _, p := range r.policies {
		parts = append(parts, p.describe(p.runs.Load(), now.Sub(r.start)))
	}
	return strings.Join(parts, ", ")
}

// firstLimit is pol's first limit, its own bucket, whose rate the status
// line shows: Limit, else the first of Limits.
func firstLimit(pol workers.Policy) workers.NamedLimit {
	if pol.Limit != nil || len(pol.Limits) == 0 {
		return workers.NamedLimit{Limit: pol.Limit, Cost: pol.Cost}
	}
	return pol.Limits[0]
}

// rateOf is a policy's rate as its spec writes it (limitspec.RateOf), with
// a period of a second for a policy a spec cannot name.
func rateOf(p throttle.Policy) (float64, time.Duration) {
	rate, period := limitspec.RateOf(p)
	if period == 0 {
		period = time.Second
	}
	return rate, period
}

func (p *policyRate) describe(runs int64, over time.Duration) string {
	period := p.period
	achieved := 0.0
	if over > 0 {
		achieved = float64(runs) / over.Seconds() * period.Seconds()
	}
	unit := unitOf(period)
	limit := strconv.FormatFloat(p.rate, 'f', -1, 64)
	// a calendar quota: a rate per day says little over seconds
	calendar := period >= 24*time.Hour
	var line string
	switch {
	case p.perKey:
		line = fmt.Sprintf("%s %.1f/%s over all keys, %s/%s per key", p.name, achieved, unit, limit, unit)
		if calendar {
			line = fmt.Sprintf("%s %d runs over all keys, %s/%s per key", p.name, runs, limit, unit)
		}
		if p.adaptive != nil && p.why != "" && p.why != "ceiling" {
			// The upstream's answers set the global bucket's rate.
			gunit := unitOf(cmp.Or(p.adaptive.Ceiling.Period, time.Second))
			line += fmt.Sprintf(", global %.1f/%s (ceiling %s/%s, %s)", p.eff, gunit,
				strconv.FormatFloat(p.adaptive.Ceiling.Rate, 'f', -1, 64), gunit, p.why)
		}
		if p.tenants != "" {
			line += " (" + p.tenants + ")"
		}
	case p.why != "" && p.why != "ceiling":
		line = fmt.Sprintf("%s %.1f/%s of %.1f/%s (ceiling %s/%s, %s)", p.name, achieved, unit, p.eff, unit, limit, unit, p.why)
	case calendar:
		line = fmt.Sprintf("%s %d runs, of %s/%s", p.name, runs, limit, unit)
	default:
		line = fmt.Sprintf("%s %.1f/%s of %s/%s", p.name, achieved, unit, limit, unit)
	}
	if !p.perKey && p.inflight != "" {
		line += ", " + p.inflight
	}
	if p.parked != "" {
		line += ", " + p.parked
	}
	return line
}

// unitOf writes a limit's period as limit specs do: s, m or h, or a
// calendar unit's nominal length as its name (limitspec.RateOf).
func unitOf(period time.Duration) string {
	switch period {
	case 24 * time.Hour:
		return "day"
	case 7 * 24 * time.Hour:
		return "week"
	case 30 * 24 * time.Hour:
		return "month"
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	}
	return period.String()
}

// statusAttrs are the fields of the status line and of the final line.
func statusAttrs(s workers.Stats, rates, mode string) []slog.Attr {
	attrs := []slog.Attr{
		slog.Int64("processed", s.Processed),
		slog.Int64("failed", s.Failed),
		slog.Int64("requeued", s.Requeued),
		slog.Int64("cooldowns", s.Cooldowns),
		slog.Int64("archived", s.Archived),
		slog.Int64("waiting", s.Waiting),
	}
	if by := waitingByPriority(s); by != "" {
		attrs = append(attrs, slog.String("waiting_by_priority", by))
	}
	if rates != "" {
		attrs = append(attrs, slog.String("rates", rates))
	}
	return append(attrs, slog.String("limiter", mode))
}

// waitingByPriority says "p1=2 p5=8" of the jobs waiting by priority, the
// priorities with none left out; "" when none waits.
func waitingByPriority(s workers.Stats) string {
	var parts []string
	for i, n := range s.WaitingByPriority {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("p%d=%d", i+1, n))
		}
	}
	return strings.Join(parts, " ")
}

// logStatus logs a status line every interval until ctx ends.
func logStatus(ctx context.Context, log *slog.Logger, interval time.Duration, pool *workers.Pool, lim *throttle.Limiter, r *rates) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.readAdaptive(ctx, lim)
			r.readShares(ctx, lim)
			r.readParked(ctx, pool)
			r.readFlight(ctx, lim)
			log.LogAttrs(ctx, slog.LevelInfo, "worker status", statusAttrs(pool.Stats(), r.snapshot(now), lim.Mode())...)
		}
	}
}
