package backoff

import (
	"net/http"
	"time"
)

// UpstreamBackoff is how long a 429 without a usable Retry-After holds the
// bucket, by attempt (0 for the first refusal): 1 s, 2 s, 4 s, ... up to
// 5 minutes, without jitter, as every caller of the bucket waits it out
// together.
var UpstreamBackoff = Exponential{Base: time.Second, Max: 5 * time.Minute}

// Upstream is the one rule sluice applies when a third-party API refuses a
// request with status 429 Too Many Requests or 503 Service Unavailable, in
// the job pool (workers.UpstreamError) and in httplimit.Transport alike.
// retryAfter is the Retry-After the upstream gave, if said; attempt counts
// the refusals of this request or job before this one (0 the first time).
//
//   - A Retry-After given, on a 429 or a 503, is a limit for everyone: cool
//     the bucket down for it (cool true; 0 or a past date means come back now).
//   - A 429 without one is a limit of unknown length: cool the bucket down
//     for UpstreamBackoff.Delay(attempt).
//   - A 503 without one is an outage, not a limit: do not pause the fleet
//     (cool false); the caller that saw it comes back after
//     UpstreamBackoff.Delay(attempt), if it retries at all.
//
// Any other status is not a refusal: ok is false. Upstream is shorthand for
// UpstreamRule{}.Refusal.
func Upstream(status int, retryAfter time.Duration, said bool, attempt int) (d time.Duration, cool, ok bool) {
	return UpstreamRule{}.Refusal(status, retryAfter, said, attempt)
}

// UpstreamRule is the rule of Upstream with its backoff for a refusal
// without Retry-After; the zero Backoff means UpstreamBackoff.
type UpstreamRule struct {
	Backoff Exponential
}

// Refusal applies the rule; see Upstream.
func (r UpstreamRule) Refusal(status int, retryAfter time.Duration, said bool, attempt int) (d time.Duration, cool, ok bool) {
	switch {
	case status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable:
		return 0, false, false
	case said:
		return max(retryAfter, 0), true, true
	}
	b := r.Backoff
	if b == (Exponential{}) {
		b = UpstreamBackoff
	}
	return b.Delay(attempt), status == http.StatusTooManyRequests, true
}
