package workers

import (
	"context"
	"time"
)

// grantedKey carries a pointer to a job's granted slot in its handler's context.
type grantedKey struct{}

// Granted returns the instant the running job's tokens were granted for: its
// turn's slot on the limiter store's clock (Redis's TIME), whether it waited
// for it in the worker or went back to its queue holding it and came back.
// Every job of a bucket is granted on that one clock, so these instants,
// unlike the handlers' start times, never hold more jobs than the policy
// allows in any span. ok is false outside a pool's handler and for a job
// that took no tokens (an unthrottled type).
func Granted(ctx context.Context) (at time.Time, ok bool) {
	g, _ := ctx.Value(grantedKey{}).(*time.Time)
	if g == nil || g.IsZero() {
		return time.Time{}, false
	}
	return *g, true
}
