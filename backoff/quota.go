package backoff

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Quota is what an upstream announced about one of its limits in an answer.
// ParseAnswer reads every quota of an answer; ParseQuota, the requests one.
type Quota struct {
	// Resource is what the quota counts.
	Resource Resource
	// Name is the upstream's own name for the quota, if it gives one: the
	// IETF policy's name, GitHub's X-RateLimit-Resource ("core", "search").
	Name string
	// Limit is the quota, per Window if that is known; 0 if not said.
	Limit float64
	// Remaining is what is left of it; with Exhausted false, 0 means not said.
	Remaining float64
	// Window is the span Limit is counted over, when the answer says it (the
	// IETF RateLimit-Policy's w); 0 if not.
	Window time.Duration
	// Rate is the announced sustainable rate, per second: Limit over Window
	// when both are said (IETF); for a quota that refills continuously
	// (Anthropic, OpenAI), what is used of it over the time it takes to
	// refill, less one unit (Remaining is a whole count, rounded down, so
	// up to one unit more may have come back already) and over the longest
	// time the reset may stand for (an RFC 3339 instant in whole seconds may
	// be up to a second early, and says no rate less than two seconds
	// away); for X-RateLimit-* fields, which name no window, what remains
	// spread over the time to the reset when that is at least two seconds
	// (a reset of one, rounded up, could be a millisecond). 0 if none could
	// be read: a rate is never guessed.
	Rate float64
	// Exhausted: the announced remaining quota is 0 (or a leaky bucket is
	// full); Reset is when the quota is whole again (0 if not said).
	Exhausted bool
	Reset     time.Duration
}

// minRateReset is the least reset, for a reset written in whole seconds,
// from which a quota over it is read as a rate.
const minRateReset = 2 * time.Second

// epochCutoff tells a Unix time from delta seconds in X-RateLimit-Reset: no
// upstream announces a reset a billion seconds (31 years) away.
const epochCutoff = 1_000_000_000

// ParseQuota reads the quota of requests an answer's header announces, in
// any dialect ParseAnswer knows; ok is false when it says nothing usable.
// It is shorthand for ParseAnswer(0, h, nil, now).Quota(Requests), without
// the problems.
func ParseQuota(h http.Header, now time.Time) (q Quota, ok bool) {
	return ParseAnswer(0, h, nil, now).Quota(Requests)
}

// quota reads the quota of resource r, from the first dialect that gives it.
func (p *parser) quota(r Resource) (Quota, bool) {
	if q, ok := p.anthropic(r); ok {
		return q, true
	}
	if r != Requests && r != Tokens {
		return Quota{}, false
	}
	if q, ok := p.openAI(r); ok {
		return q, true
	}
	if r != Requests {
		return Quota{}, false
	}
	if q, ok := p.ietf(); ok {
		return q, true
	}
	if q, ok := p.trio("RateLimit-"); ok {
		return q, true
	}
	if q, ok := p.trio("X-RateLimit-"); ok {
		return q, true
	}
	return p.shopify()
}

// counts reads a quota's limit and remaining fields into q; read reports
// whether either was there and readable.
func (p *parser) counts(q *Quota, limit, remaining string) (read bool) {
	if l, ok := p.number(limit); ok {
		q.Limit, read = l, true
	}
	if r, ok := p.number(remaining); ok {
		q.Remaining, q.Exhausted, read = r, r == 0, true
	}
	return read
}

// refilling sets the Rate of a quota that refills continuously, the least
// rate its fields allow: what is used of it, less the unit the rounding of
// Remaining may hide, over the time to refill it plus slack, how much
// earlier than the truth that time may be written. A quota with less than
// two units used says no rate, nor one whose reset is so short that the
// slack would make the least rate a fraction of the real one.
func refilling(q *Quota, slack time.Duration) {
	used := q.Limit - q.Remaining
	if (q.Remaining > 0 || q.Exhausted) && used >= 2 && q.Reset > 0 && q.Reset >= 2*slack {
		q.Rate = (used - 1) / (q.Reset + slack).Seconds()
	}
}

// anthropic reads anthropic-ratelimit-R-{limit,remaining,reset}, the reset an
// RFC 3339 instant.
func (p *parser) anthropic(r Resource) (Quota, bool) {
	prefix := "Anthropic-Ratelimit-" + string(r) + "-"
	var q Quota
	read := p.counts(&q, prefix+"limit", prefix+"remaining")
	slack := time.Duration(0)
	if v, ok := p.field(prefix + "reset"); ok {
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
		if err != nil {
			p.bad(strings.ToLower(prefix)+"reset", v, "is not an RFC 3339 instant")
		} else {
			q.Reset, read = min(max(t.Sub(p.now), 0), MaxRetryAfter), true
		}
		if !strings.Contains(v, ".") {
			slack = time.Second // the instant may be cut to the second
		}
	}
	refilling(&q, slack)
	return q, read
}

// openAI reads x-ratelimit-{limit,remaining,reset}-R, the reset a duration
// ("6m0s", "120ms"; a bare number is seconds).
func (p *parser) openAI(r Resource) (Quota, bool) {
	var q Quota
	read := p.counts(&q, "X-Ratelimit-Limit-"+string(r), "X-Ratelimit-Remaining-"+string(r))
	if v, ok := p.field("X-Ratelimit-Reset-" + string(r)); ok {
		if d, err := parseDuration(v); err != nil {
			p.bad("x-ratelimit-reset-"+string(r), v, "is not a duration")
		} else {
			q.Reset, read = d, true
		}
	}
	refilling(&q, 0)
	return q, read
}

// ietf reads the first policy of RateLimit-Policy (`"p";q=100;w=60`) and
// of RateLimit (`"p";r=0;t=12`).
func (p *parser) ietf() (Quota, bool) {
	pol, ok := p.field("RateLimit-Policy")
	if !ok {
		return Quota{}, false
	}
	var q Quota
	read := false
	if name, qv, w, found := sfParams(pol, "q", "w"); found && qv > 0 && w > 0 {
		q.Name, q.Limit, q.Window, q.Rate, read = name, qv, seconds(w), qv/w, true
	} else {
		p.bad("RateLimit-Policy", pol, "has no positive q and w in its first policy")
	}
	if rl, ok := p.field("RateLimit"); ok {
		if _, r, t, found := sfParams(rl, "r", "t"); found {
			q.Remaining, q.Exhausted, q.Reset, read = r, r <= 0, seconds(t), true
		} else {
			p.bad("RateLimit", rl, "has no r and t in its first policy")
		}
	}
	return q, read
}

// trio reads prefix Limit, Remaining, Reset, and the fields GitHub
// (Used, Resource) and Discord (Reset-After) add to X-RateLimit-*. Reset
// is delta seconds or, over a billion, a Unix time.
func (p *parser) trio(prefix string) (Quota, bool) {
	var q Quota
	read := p.counts(&q, prefix+"Limit", prefix+"Remaining")
	if used, ok := p.number(prefix + "Used"); ok && q.Limit > 0 && !p.has(prefix+"Remaining") {
		q.Remaining = max(q.Limit-used, 0)
		q.Exhausted, read = q.Remaining == 0, true
	}
	if name, ok := p.field(prefix + "Resource"); ok {
		q.Name = strings.TrimSpace(name)
	}
	resetSaid := false
	if after, ok := p.number(prefix + "Reset-After"); ok {
		q.Reset, resetSaid, read = seconds(after), true, true
	} else if reset, ok := p.number(prefix + "Reset"); ok {
		if reset > epochCutoff {
			reset -= float64(p.now.UnixNano()) / 1e9
		}
		q.Reset, resetSaid, read = seconds(reset), true, true
	}
	// What remains over the time to the reset, for a reset of a few
	// seconds at least: one second, rounded up, may be a millisecond.
	if q.Remaining > 0 && resetSaid && q.Reset >= minRateReset {
		q.Rate = q.Remaining / q.Reset.Seconds()
	}
	return q, read
}

// has reports whether field name is present and readable as a number.
func (p *parser) has(name string) bool {
	v, ok := p.field(name)
	if !ok {
		return false
	}
	_, err := parseNumber(v)
	return err == nil
}

// shopify reads X-Shopify-Shop-Api-Call-Limit: USED/CAPACITY, the state of
// a leaky bucket; it says no rate (the bucket leaks at a pace it does not
// announce) and no reset.
func (p *parser) shopify() (Quota, bool) {
	const name = "X-Shopify-Shop-Api-Call-Limit"
	v, ok := p.field(name)
	if !ok {
		return Quota{}, false
	}
	u, c, found := strings.Cut(v, "/")
	used, errU := parseNumber(u)
	capacity, errC := parseNumber(c)
	if !found || errU != nil || errC != nil || capacity == 0 {
		p.bad(name, v, "is not USED/CAPACITY")
		return Quota{}, false
	}
	q := Quota{Limit: capacity, Remaining: max(capacity-used, 0)}
	q.Exhausted = q.Remaining == 0
	return q, true
}

// sfParams reads the name and two numeric parameters a and b of the first
// member of a Structured Field List such as `"default";q=100;w=60, "other";q=5;w=1`.
func sfParams(field, a, b string) (name string, va, vb float64, ok bool) {
	first, _, _ := strings.Cut(field, ",")
	params := strings.Split(first, ";")
	name = strings.Trim(strings.TrimSpace(params[0]), `"`)
	var gotA, gotB bool
	for _, p := range params[1:] {
		key, value, found := strings.Cut(strings.TrimSpace(p), "=")
		if !found {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || !finite(v) || v < 0 {
			continue
		}
		switch key {
		case a:
			va, gotA = v, true
		case b:
			vb, gotB = v, true
		}
	}
	return name, va, vb, gotA && gotB
}

// parseNumber reads a non-negative decimal number, "12" or "0.64", with
// spaces and tabs around it.
func parseNumber(v string) (float64, error) {
	v = strings.Trim(v, " \t")
	whole, frac, hasFrac := strings.Cut(v, ".")
	if !isDigits(whole) || (hasFrac && !isDigits(frac)) {
		return 0, strconv.ErrSyntax
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil && !math.IsInf(f, 1) { // too many digits: +Inf, clamped by the caller
		return 0, err
	}
	return f, nil
}

// parseDuration reads a reset written as a Go duration ("1m30.5s") or bare
// seconds, clamped to MaxRetryAfter; a negative one is an error.
func parseDuration(v string) (time.Duration, error) {
	v = strings.Trim(v, " \t")
	if s, err := parseNumber(v); err == nil {
		return seconds(s), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, strconv.ErrRange
	}
	return min(d, MaxRetryAfter), nil
}

// seconds converts s seconds to a Duration in [0, MaxRetryAfter].
func seconds(s float64) time.Duration {
	return clampDuration(s*float64(time.Second), 0, MaxRetryAfter)
}
