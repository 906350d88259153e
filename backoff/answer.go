package backoff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"
)

// Resource is what one of an upstream's limits counts.
type Resource string

// The resources an upstream announces limits on.
const (
	Requests     Resource = "requests"
	Tokens       Resource = "tokens"
	InputTokens  Resource = "input-tokens"
	OutputTokens Resource = "output-tokens"
)

// ErrMalformed is wrapped by each of Answer.Problems: a rate-limit field
// whose value could not be read, and which was ignored.
var ErrMalformed = errors.New("backoff: malformed rate-limit field")

// Answer is what an HTTP answer from an upstream says about its rate limits:
// what it announced of each of its quotas, and whether the answer is a
// refusal, with how long the upstream asked to wait. ParseAnswer reads it;
// UpstreamRule.Answer decides what a refusal does to the bucket.
type Answer struct {
	// Status is the answer's status code.
	Status int
	// Quotas are the quotas the answer announced, at most one per
	// Resource, requests first.
	Quotas []Quota
	// Refused: the upstream refused the request for its limit or load: a
	// 429, a 503, or a 403 that says it is a limit (a spent quota, or a
	// Retry-After), as GitHub answers. A 403 without either is not.
	Refused bool
	// Wait is how long the upstream asked a refused request to wait, when
	// WaitSaid: retry-after-ms, else Retry-After, else the JSON body's
	// retry_after (Discord), else, for a 429 or a 403, the latest reset of
	// a spent quota. At most MaxRetryAfter.
	Wait     time.Duration
	WaitSaid bool
	// Problems are the fields that were present but could not be read, each
	// wrapping ErrMalformed; they were ignored, and nothing was guessed in
	// their place. A caller logs them, once per upstream rather than once
	// per answer.
	Problems []error
}

// Quota returns what the answer announced about resource r, if anything.
func (a Answer) Quota(r Resource) (Quota, bool) {
	for _, q := range a.Quotas {
		if q.Resource == r {
			return q, true
		}
	}
	return Quota{}, false
}

// ParseAnswer reads an upstream's answer: its status, its header, and the
// start of its body (nil if the caller did not keep it; only a refusal's body
// is read, for a JSON object's retry_after in seconds). now is when the
// answer was received; resets and dates are measured from it.
//
// It knows these dialects, each quota taken from the first that gives it:
//
//   - Anthropic: anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset},
//     the reset an RFC 3339 instant;
//   - OpenAI: x-ratelimit-{limit,remaining,reset}-{requests,tokens}, the
//     reset a Go-style duration ("1s", "6m0s", "120ms", "1m30.5s");
//   - IETF (draft-ietf-httpapi-ratelimit-headers): RateLimit-Policy and
//     RateLimit, or the older RateLimit-Limit / -Remaining / -Reset;
//   - X-RateLimit-Limit / -Remaining / -Reset, the reset delta seconds or a
//     Unix time; with GitHub's X-RateLimit-Used and -Resource and Discord's
//     X-RateLimit-Reset-After (float seconds, preferred to -Reset);
//   - Shopify: X-Shopify-Shop-Api-Call-Limit: USED/CAPACITY, a leaky bucket;
//   - retry-after-ms, and Retry-After as delta seconds, a decimal fraction
//     ("2.0") or an HTTP date.
//
// The quotas of Anthropic and OpenAI refill continuously: their Rate is the
// least rate what was used of the limit over the time to refill it allows
// (see Quota.Rate). A malformed field is skipped and reported in Problems;
// ParseAnswer never fails.
func ParseAnswer(status int, h http.Header, body []byte, now time.Time) Answer {
	a := Answer{Status: status}
	p := &parser{h: h, now: now}
	for _, r := range [...]Resource{Requests, Tokens, InputTokens, OutputTokens} {
		if q, ok := p.quota(r); ok {
			q.Resource = r
			a.Quotas = append(a.Quotas, q)
		}
	}
	wait, said := p.waitSaid()
	spent := false
	for _, q := range a.Quotas {
		spent = spent || q.Exhausted
	}
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		a.Refused = true
	case http.StatusForbidden:
		a.Refused = said || spent
	}
	if a.Refused && !said {
		wait, said = p.bodyRetryAfter(body)
	}
	if a.Refused && !said && status != http.StatusServiceUnavailable {
		// A 503 without a wait is an outage, whatever the quota says.
		wait, said = latestReset(a.Quotas)
	}
	if a.Refused {
		a.Wait, a.WaitSaid = wait, said
	}
	a.Problems = p.problems
	return a
}

// Answer applies the rule to a parsed answer: a refused 403 (see
// Answer.Refused) counts as a 429, and the wait is Answer.Wait if said. ok
// is false when the answer is not a refusal.
func (r UpstreamRule) Answer(a Answer, attempt int) (d time.Duration, cool, ok bool) {
	if !a.Refused {
		return 0, false, false
	}
	status := a.Status
	if status == http.StatusForbidden {
		status = http.StatusTooManyRequests
	}
	return r.Refusal(status, a.Wait, a.WaitSaid, attempt)
}

// latestReset is the latest reset of the spent quotas, if any says one.
func latestReset(qs []Quota) (time.Duration, bool) {
	var d time.Duration
	said := false
	for _, q := range qs {
		if q.Exhausted && q.Reset > 0 {
			d, said = max(d, q.Reset), true
		}
	}
	return d, said
}

// parser reads the fields of one header, collecting what it could not read.
type parser struct {
	h        http.Header
	now      time.Time
	problems []error
}

// field is the first value of the field name, and whether it is present.
func (p *parser) field(name string) (string, bool) {
	v := p.h.Values(name)
	if len(v) == 0 {
		return "", false
	}
	return v[0], true
}

// bad records that field name's value v could not be read, and why.
func (p *parser) bad(name, v, why string) {
	p.problems = append(p.problems, fmt.Errorf("%w %s: %s %s", ErrMalformed, name, quote(v), why))
}

// number reads field name as a finite, non-negative number.
func (p *parser) number(name string) (float64, bool) {
	v, ok := p.field(name)
	if !ok {
		return 0, false
	}
	f, err := parseNumber(v)
	if err != nil {
		p.bad(name, v, "is not a non-negative number")
		return 0, false
	}
	return f, true
}

// waitSaid reads the wait an answer's header asks for: retry-after-ms, else
// Retry-After.
func (p *parser) waitSaid() (time.Duration, bool) {
	if v, ok := p.field("Retry-After-Ms"); ok {
		ms, err := parseNumber(v)
		if err == nil {
			return seconds(ms / 1000), true
		}
		p.bad("retry-after-ms", v, "is not a non-negative number of milliseconds")
	}
	d, ok, err := RetryAfterFromHeader(p.h, p.now)
	if err != nil {
		p.problems = append(p.problems, malformedRetryAfter{err})
		return 0, false
	}
	return d, ok
}

// malformedRetryAfter is ParseRetryAfter's error, as a problem: it matches
// ErrMalformed too, and reads as it did.
type malformedRetryAfter struct{ error }

func (e malformedRetryAfter) Unwrap() []error { return []error{e.error, ErrMalformed} }

// maxBody bounds how much of a refusal's body is read for its retry_after.
const maxBody = 64 << 10

// bodyRetryAfter reads retry_after, in seconds, from a JSON object body, as
// Discord sends with a 429. A body that is not such an object says nothing
// (no problem: most bodies are not); a retry_after that is not a
// non-negative number is a problem.
func (p *parser) bodyRetryAfter(body []byte) (time.Duration, bool) {
	if len(body) > maxBody {
		return 0, false
	}
	raw, ok := jsonMember(body, "retry_after")
	if !ok {
		return 0, false
	}
	f, err := parseNumber(string(raw))
	if err != nil {
		p.bad("retry_after (body)", string(raw), "is not a non-negative number of seconds")
		return 0, false
	}
	return seconds(f), true
}

// finite reports whether f is a number, not NaN or an infinity.
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// jsonMember is the raw value of member name of body, a JSON object; ok is
// false when body is not one or has no such member.
func jsonMember(body []byte, name string) (json.RawMessage, bool) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return nil, false
	}
	raw, ok := obj[name]
	return raw, ok
}
