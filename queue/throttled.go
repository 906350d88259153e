package queue

import (
	"errors"
	"time"
)

// ErrThrottled is matched by every [*ThrottledError]. A handler may also
// return it bare; it then counts as throttled for [IsFailure], but carries no
// come-back time, so [RetryDelayFunc] leaves the delay to its fallback.
var ErrThrottled = errors.New("queue: throttled")

// ThrottledError says: this job is not a failure, it was throttled; run it
// again after RetryAfter. Create one with [Throttled]; match it with
// errors.Is(err, ErrThrottled), or errors.As to read RetryAfter.
//
// A handler that returns it relies on asynq's retry path, which archives a
// task whose retries are spent whatever the error (see [IsFailure]). The
// worker middleware instead sends a throttled job back with [Client.Requeue].
type ThrottledError struct {
	RetryAfter time.Duration // how long to wait before running the job again; never negative
	Reason     string        // optional, for people: which limit, which upstream
}

// Throttled returns a [*ThrottledError]. A negative retryAfter is taken as 0.
func Throttled(retryAfter time.Duration, reason string) error {
	return &ThrottledError{RetryAfter: max(retryAfter, 0), Reason: reason}
}

// Error returns "queue: throttled: <reason>: come back in <RetryAfter>", or
// without the reason part when Reason is empty.
func (e *ThrottledError) Error() string {
	msg := ErrThrottled.Error()
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg + ": come back in " + max(e.RetryAfter, 0).String()
}

// Is reports whether target is [ErrThrottled].
func (e *ThrottledError) Is(target error) bool {
	return target == ErrThrottled
}
