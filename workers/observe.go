package workers

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/internal/upstream"
	"github.com/sluicehq/sluice/throttle"
)

// noteKey carries a job's upstreamNote in its handler's context.
type noteKey struct{}

// upstreamNote is what the handler saw of the upstream's announced quotas.
type upstreamNote struct {
	mu       sync.Mutex
	last     backoff.Answer // the last quota announced of each resource, in Quotas
	problems []error        // fields the upstream wrote that could not be read
}

// ObserveResponse records what an upstream's answer says about its rate
// limit, in any dialect backoff.ParseAnswer reads, for the pool, which
// applies it to the upstream's adaptive bucket (Policy.AdaptKey) once the
// handler returns: the announced rate becomes the fleet's effective rate
// (never above the ceiling), and a quota announced as exhausted holds the
// bucket until its reset instead of drawing a 429. A handler calls it with
// each answer it gets; the http:request job does. It does nothing outside a
// pool's handler or for a policy that does not adapt, and reads only the
// headers. Fields that cannot be read are ignored, and
// the pool warns of them once per policy. It is shorthand for
// ObserveAnswer(ctx, backoff.ParseAnswer(resp.StatusCode, resp.Header, nil, time.Now())).
func ObserveResponse(ctx context.Context, resp *http.Response) {
	if resp == nil {
		return
	}
	ObserveAnswer(ctx, backoff.ParseAnswer(resp.StatusCode, resp.Header, nil, time.Now()))
}

// ObserveAnswer is ObserveResponse for an answer the handler parsed itself.
//
// The pool applies the quota of requests to the upstream's bucket, and each
// quota of tokens (Tokens, InputTokens, OutputTokens) to the policy's limit
// named for it (NamedLimit.Name "tokens", "input-tokens", "output-tokens"),
// which adapts to it under Policy.Adapt (unless the upstream's bucket is
// Global: the named limits are then per key).
func ObserveAnswer(ctx context.Context, a backoff.Answer) {
	n, _ := ctx.Value(noteKey{}).(*upstreamNote)
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, q := range a.Quotas {
		i := slices.IndexFunc(n.last.Quotas, func(o backoff.Quota) bool { return o.Resource == q.Resource })
		if i < 0 {
			n.last.Quotas = append(n.last.Quotas, q)
		} else {
			n.last.Quotas[i] = q
		}
	}
	n.problems = append(n.problems, a.Problems...)
}

// warnMalformed warns, once per policy for the life of the pool, of the
// rate-limit fields job j's upstream wrote that could not be read: they
// were ignored, and each answer would repeat them.
func (p *Pool) warnMalformed(j *job) {
	j.note.mu.Lock()
	errs := j.note.problems
	j.note.problems = nil
	j.note.mu.Unlock()
	if len(errs) == 0 {
		return
	}
	if _, warned := p.malformed.LoadOrStore(j.rt.name, struct{}{}); warned {
		return
	}
	j.logger().Warn("workers: the upstream's rate-limit fields cannot all be read; they are ignored (warned once per policy)",
		"problems", problems(errs))
}

// applyNote applies what job j's handler observed (ObserveResponse) to its
// adaptive bucket: an announced rate, or else a capacity (internal/upstream.Target),
// becomes its effective rate; a spent quota holds it until its reset. A
// spent quota lowers the rate as a refusal does only when nothing the
// upstream said bounds it: once it has, the quota spent is its limit
// reached at that rate, and it comes back at the reset. It reports whether
// the quota of requests is spent with a reset said under such a bound: a
// refusal that says so (GitHub's 403) is then that wait, not an overload,
// and lowers nothing either.
func (p *Pool) applyNote(ctx context.Context, j *job) (spentAtWord bool) {
	p.applyTokens(ctx, j) // tokens.go
	j.note.mu.Lock()
	q, ok := j.note.last.Quota(backoff.Requests)
	j.note.mu.Unlock()
	a := j.pol.adaptive
	if !ok || a == nil {
		return false
	}
	// rate is per the ceiling's period, when the upstream's word bounds it.
	rate, announce, err := upstream.Target(context.WithoutCancel(ctx), p.cfg.Limiter, j.upstream(), *a, q)
	switch {
	case err != nil:
		j.logger().Debug("workers: cannot read the adaptive rate for the announced quota", "err", err)
	case announce:
		rate = p.announced(ctx, j, rate)
	}
	if q.Exhausted && rate <= 0 {
		// No rate said or bounded: a spent quota is the upstream's limit
		// reached, an overload as a 429 is, without the 429.
		p.adaptRefused(ctx, j)
	}
	if q.Exhausted && q.Reset > 0 {
		// Held at the effective rate (the Adaptive policy: the store reads
		// it), as the bucket is reserved at it: the bucket comes out of the
		// hold empty, one turn at the end and then one per turn of that
		// rate (held at the ceiling, it would come out with the effective
		// rate's burst in hand, which the spent upstream has not).
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		_, err := p.cfg.Limiter.Cooldown(sctx, j.upstream(), *a, exhaustedHold(q, perSecond(*a, rate)))
		cancel()
		if err != nil {
			j.logger().Debug("workers: cannot hold the bucket for the announced reset", "err", err)
		} else {
			j.logger().Info("workers: the upstream's quota is spent: the bucket waits for its announced reset",
				"bucket", j.upstream(), "reset", q.Reset)
		}
	}
	return q.Exhausted && q.Reset > 0 && rate > 0
}

// exhaustedHold is how long a bucket is held when the upstream announces its
// quota spent: until the announced reset. The fields write the reset in
// whole seconds, rounded up, so a reset of one second says only "within the
// second": the quota of a token-bucket upstream comes back one request at a
// time, the first after 1/rate. So with a rate (per second) known from the
// upstream's word (announced, or its capacity's), a reset of a second or
// less holds for one request's time at that rate: a fixed-window upstream
// may then answer one 429, whose Retry-After holds the bucket in turn
// (docs/adaptive.md).
func exhaustedHold(q backoff.Quota, rate float64) time.Duration {
	if rate > 0 && q.Reset <= time.Second {
		return min(q.Reset, time.Duration(float64(time.Second)/rate))
	}
	return q.Reset
}

// perSecond is rate, per the ceiling's period of a, per second.
func perSecond(a throttle.Adaptive, rate float64) float64 {
	if a.Ceiling.Period == 0 {
		return rate
	}
	return rate / a.Ceiling.Period.Seconds()
}
