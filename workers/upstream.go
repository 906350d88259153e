package workers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/backoff"
)

// UpstreamError reports that a third-party API refused a job's request because
// of its own rate limit (429 Too Many Requests, or a 403 Forbidden that says
// it is one) or overload (503 Service Unavailable). A handler returns it; the
// pool then applies backoff.UpstreamRule: a 429 or a limit's 403, or a 503
// with a Retry-After, puts the upstream's bucket (Policy.AdaptKey) into
// cooldown (for RetryAfter, or the pool's backoff when the upstream gave
// none), so every host's workers pause, and sends the job back to its queue
// for after the cooldown; a 503 without Retry-After is an outage, not a
// limit: the job comes back after the backoff and the bucket goes on. It is
// not a failure.
type UpstreamError struct {
	StatusCode int
	// RetryAfter is what the upstream asked for; 0 when it did not say (or said
	// something unusable), in which case the pool backs off exponentially.
	RetryAfter time.Duration
	// Reason keeps the rate-limit fields the answer had but could not be
	// read (backoff.Answer.Problems), for logs; empty otherwise.
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

// answer is e as the answer backoff.UpstreamRule decides on: a refusal,
// with its wait if the upstream said one.
func (e *UpstreamError) answer() backoff.Answer {
	return backoff.Answer{Status: e.StatusCode, Refused: true, Wait: e.RetryAfter, WaitSaid: e.RetryAfter > 0}
}

// FromResponse returns an *UpstreamError for an answer that refuses the
// request for the upstream's limit or load (see backoff.ParseAnswer: a 429,
// a 503, or a 403 with a spent quota or a Retry-After), with the wait it
// asks for read from its header against now, and nil for any other answer.
// The response body is left to the caller; FromAnswer also reads a body's
// retry_after. It is shorthand for FromAnswer(backoff.ParseAnswer(resp.StatusCode, resp.Header, nil, now)).
func FromResponse(resp *http.Response, now time.Time) error {
	if resp == nil {
		return nil
	}
	return FromAnswer(backoff.ParseAnswer(resp.StatusCode, resp.Header, nil, now))
}

// FromAnswer returns an *UpstreamError for an answer that is a refusal
// (a.Refused), and nil for any other.
func FromAnswer(a backoff.Answer) error {
	if !a.Refused {
		return nil
	}
	e := &UpstreamError{StatusCode: a.Status, Reason: problems(a.Problems)}
	if a.WaitSaid {
		e.RetryAfter = a.Wait
	}
	return e
}

// problems writes errs in one line, "" for none.
func problems(errs []error) string {
	if len(errs) == 0 {
		return ""
	}
	return strings.ReplaceAll(errors.Join(errs...).Error(), "\n", "; ")
}
