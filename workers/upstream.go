package workers

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/backoff"
)

// UpstreamError reports that a third-party API refused a job's request because
// of its own rate limit (429 Too Many Requests) or overload (503 Service
// Unavailable). A handler returns it; the pool then applies
// backoff.Upstream's rule: a 429, or a 503 with a Retry-After, puts the job's
// bucket into cooldown (for RetryAfter, or the pool's backoff when the 429 gave
// none), so every host's workers pause, and sends the job back to its queue for
// after the cooldown; a 503 without Retry-After is an outage, not a limit: the
// job comes back after the backoff and the bucket goes on. It is not a failure.
type UpstreamError struct {
	StatusCode int
	// RetryAfter is what the upstream asked for; 0 when it did not say (or said
	// something unusable), in which case the pool backs off exponentially.
	RetryAfter time.Duration
	// Reason keeps the parse error of a bad Retry-After, for logs; empty otherwise.
	Reason string
}

func (e *UpstreamError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("workers: upstream answered %d, retry after %v", e.StatusCode, e.RetryAfter)
	}
	if e.Reason != "" {
		return fmt.Sprintf("workers: upstream answered %d (%s)", e.StatusCode, e.Reason)
	}
	return fmt.Sprintf("workers: upstream answered %d", e.StatusCode)
}

// FromResponse returns an *UpstreamError for a 429 or 503 response, with its
// Retry-After parsed by backoff.ParseRetryAfter against now, and nil for any
// other status. The response body is left to the caller.
func FromResponse(resp *http.Response, now time.Time) error {
	if resp == nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return nil
	}
	e := &UpstreamError{StatusCode: resp.StatusCode}
	d, ok, err := backoff.RetryAfterFromHeader(resp.Header, now)
	switch {
	case err != nil:
		e.Reason = err.Error()
	case ok:
		e.RetryAfter = d
	}
	return e
}
