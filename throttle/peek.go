package throttle

import (
	"context"
	"time"
)

// State is a bucket's state as Peek reads it.
type State struct {
	// Remaining is what a request could have at once now (tokens left in a
	// token bucket, room left in a window or a leaky bucket); 0 while earlier
	// callers' bookings lie ahead.
	Remaining int
	// NextFree is how long a request for one would wait if made now (0: it
	// would be granted at once); for a full LeakyBucket, its RetryAfter.
	NextFree time.Duration
	// ResetAfter is how long until the bucket could grant its most at once
	// (Burst, Max or Capacity) if nothing more were taken.
	ResetAfter time.Duration
	// Cooldown is what is left of a cooldown on the key (Limiter.Cooldown), 0 if none.
	Cooldown time.Duration
	// Used and Resets are a calendar quota's (a FixedWindow with a Calendar
	// unit): what the window of now has counted, Max less Remaining, and when
	// that window ends, its reset, on the store's clock. Zero for any other
	// policy.
	Used   int
	Resets time.Time
}

// Peek reads the bucket key under policy without taking anything: what a
// request could have now, when the next one would be granted, and any
// cooldown. It is for dashboards and operators; a caller that means to take
// should call TryAcquire, whose answer cannot be overtaken by another's.
func (l *Limiter) Peek(ctx context.Context, key string, policy Policy) (State, error) {
	b, err := l.bucketOf(key, policy)
	if err != nil {
		return State{}, err
	}
	return l.seam.peek(ctx, l.cfg.prefix, b)
}

// Reset forgets the bucket key under policy: its bookings, its cancelled
// turns and its cooldown, so the next request finds it full. Reservations
// made before keep their slots (their holders may act then), and their
// refunds give nothing back; the tickets issued for the bucket before are
// void (RedeemTicket no longer finds them), since the turns they were booked
// among are gone. The key's other policies are not touched. The tickets are
// voided first: a Reset that fails after may have voided them (their
// holders take new turns), never reset the bucket with its tickets standing.
func (l *Limiter) Reset(ctx context.Context, key string, policy Policy) error {
	b, err := l.bucketOf(key, policy)
	if err != nil {
		return err
	}
	return l.seam.reset(ctx, l.cfg.prefix, b)
}

// bucketOf checks a one-bucket call on key under policy before any I/O.
func (l *Limiter) bucketOf(key string, policy Policy) (Bucket, error) {
	if l.err != nil {
		return Bucket{}, l.err
	}
	if err := checkName(key); err != nil {
		return Bucket{}, err
	}
	a, err := asAlgo(policy)
	if err != nil {
		return Bucket{}, err
	}
	if err := a.validate(); err != nil {
		return Bucket{}, err
	}
	return Bucket{Key: key, Limit: a, N: 1}, nil
}
