package main

import (
	"context"
	"time"
)

// fillHistory sets the History of v, a type's first row, and the
// LongestWaitS of its tenants, from the rings the workers keep in the
// limiter's Redis (internal/history). The ring's reader is not on this
// branch yet: both stay absent, which the page and sluice inspect show as
// no history.
func (f *fleet) fillHistory(ctx context.Context, v *limitView, now time.Time) {
	_, _, _ = ctx, v, now
}
