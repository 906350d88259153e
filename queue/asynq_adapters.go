package queue

import (
	"errors"
	"time"

	"github.com/hibiken/asynq"
)

// MinRetryDelay is the shortest delay [RetryDelayFunc] gives a throttled task.
//
// asynq keeps a retry's due time in whole Unix seconds, truncated, so a
// sub-second delay is lost: the task would be due at once and come back on the
// next forwarder tick (Config.DelayedTaskCheckInterval), however often the
// handler says "later". With at least one second the due time is always a
// later second than now. Expect a task to come back up to one second before
// its RetryAfter has passed; the middleware's Acquire waits out the rest.
const MinRetryDelay = time.Second

// RetryDelayFunc returns an asynq.RetryDelayFunc for Config.RetryDelayFunc.
// For an error that matches [*ThrottledError] (errors.As) the delay is its
// RetryAfter, at least [MinRetryDelay]. For any other error, including a bare
// [ErrThrottled], it calls fallback; a nil fallback means
// asynq.DefaultRetryDelayFunc.
//
// With [IsFailure] as Config.IsFailure, throttling does not increase the retry
// count that fallback receives, so it does not grow the backoff of real
// failures either.
func RetryDelayFunc(fallback asynq.RetryDelayFunc) asynq.RetryDelayFunc {
	if fallback == nil {
		fallback = asynq.DefaultRetryDelayFunc
	}
	return func(n int, err error, t *asynq.Task) time.Duration {
		var te *ThrottledError
		if errors.As(err, &te) {
			return max(te.RetryAfter, MinRetryDelay)
		}
		return fallback(n, err, t)
	}
}

// IsFailure reports whether err counts as a failure for asynq: false for nil
// and for errors matching [ErrThrottled], true otherwise. Use it as
// Config.IsFailure: a throttled task then goes to the retry set without
// spending a retry and without counting as failed.
//
// asynq consults IsFailure only for a task with retries left: one whose
// retries are spent (including any task with MaxRetry 0) is archived on any
// error, throttled or not. That is why the worker middleware sends throttled
// jobs back with [Client.Requeue] and returns nil, and IsFailure is only the
// safety net for handlers that return a throttled error themselves.
func IsFailure(err error) bool {
	return err != nil && !errors.Is(err, ErrThrottled)
}
