package workers

import (
	"context"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/internal/upstream"
	"github.com/sluicehq/sluice/throttle"
)

// This file is how an upstream's announcements about tokens reach the
// buckets named for them. An LLM API announces its quota of requests and of
// tokens (x-ratelimit-remaining-tokens, anthropic-ratelimit-output-tokens-*):
// the first goes to the upstream's request bucket (observe.go), each of the
// others to the policy's limit named for it, "tokens", "input-tokens" or
// "output-tokens" (NamedLimit.Name), which then adapts as the request bucket
// does: an announced rate (or a capacity: internal/upstream.Target) becomes its effective
// rate, never above its configured one, and a quota spent holds it until
// its reset. Refusals and successes move the request bucket only: a refusal
// does not say which quota it was for, and a spent quota of tokens says so
// itself. A policy whose upstream's bucket is Global (Key and Global) keeps
// its named limits per key, none of which is the account's: they do not
// adapt.

// tokenFloor is a tokens limit's floor, as a fraction of its rate: 1/1000.
const tokenFloor = 1000

// tokenResources are the resources a limit's name may stand for.
var tokenResources = [...]backoff.Resource{backoff.Tokens, backoff.InputTokens, backoff.OutputTokens}

// tokenLimits finds p's limits named for a resource of tokens, other than
// the first (the upstream's request bucket), that can adapt: token buckets
// (throttle.Limit), under Adapt, when the upstream's bucket is not Global.
func tokenLimits(p *policy) map[backoff.Resource]int {
	if !p.Adapt || p.upGlobal {
		return nil
	}
	var out map[backoff.Resource]int
	for i, l := range p.limits {
		if i == 0 {
			continue
		}
		for _, r := range tokenResources {
			if _, ok := limitOf(l.Limit); ok && l.Name == string(r) {
				if out == nil {
					out = make(map[backoff.Resource]int, len(tokenResources))
				}
				out[r] = i
			}
		}
	}
	return out
}

// tokenAdaptive is the adaptive limit of p's i-th limit, if it is one of its
// tokens limits.
func (p *policy) tokenAdaptive(i int) (throttle.Adaptive, bool) {
	for _, j := range p.tokens {
		if j == i {
			l, _ := limitOf(p.limits[i].Limit)
			// Only announcements move it, never a blind decrease: its
			// floor is what keeps a misread from stalling it, no more.
			return throttle.Adaptive{Ceiling: l, Floor: l.Rate / tokenFloor}, true
		}
	}
	return throttle.Adaptive{}, false
}

// applyTokens applies the quotas of tokens job j's handler observed to the
// limits named for them.
func (p *Pool) applyTokens(ctx context.Context, j *job) {
	if len(j.pol.tokens) == 0 {
		return
	}
	for _, r := range tokenResources {
		i, ok := j.pol.tokens[r]
		if !ok || i >= len(j.buckets) {
			continue
		}
		j.note.mu.Lock()
		q, said := j.note.last.Quota(r)
		j.note.mu.Unlock()
		if said {
			p.tokensAnnounced(ctx, j, i, q)
		}
	}
}

// tokensAnnounced applies quota q to job j's i-th bucket, a tokens limit:
// its rate, or its capacity, and a spent quota's reset.
func (p *Pool) tokensAnnounced(ctx context.Context, j *job, i int, q backoff.Quota) {
	a, _ := j.pol.tokenAdaptive(i)
	key := j.buckets[i].Key
	cctx := context.WithoutCancel(ctx)
	rate, announce, err := upstream.Target(cctx, p.cfg.Limiter, key, a, q)
	if err != nil {
		return
	}
	if announce {
		st, changed, err := p.cfg.Limiter.Announced(cctx, key, a, rate)
		if err != nil {
			j.logger().Debug("workers: cannot report the announced quota of tokens", "err", err)
			return
		}
		rate = st.Rate
		if changed {
			j.logger().Info("workers: the upstream announced its quota of tokens: the fleet's effective rate for the limit follows it",
				"bucket", key, "resource", string(q.Resource), "rate", st.Rate, "ceiling", a.Ceiling.Rate, "per", a.Ceiling.Period.String())
		}
	}
	if q.Exhausted && q.Reset > 0 {
		sctx, cancel := context.WithTimeout(cctx, storeTimeout)
		_, err := p.cfg.Limiter.Cooldown(sctx, key, a, exhaustedHold(q, perSecond(a, rate)))
		cancel()
		if err != nil {
			j.logger().Debug("workers: cannot hold the limit for the announced reset of its tokens", "err", err)
		}
	}
}
