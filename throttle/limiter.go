package throttle

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Limiter takes tokens from buckets kept in a Store. Most callers want Acquire,
// which blocks until the tokens are theirs; TryAcquire never waits; Reserve
// books tokens now and lets the caller decide when to wait. The *All forms take
// several buckets at once, all or nothing.
//
// A Limiter holds no bucket state of its own, except the local buckets of
// FailLocal and what it last read of adaptive buckets (AdaptiveLimit). Its
// only goroutines send a queued batch of coalesced calls while their callers
// wait (none outlives its calls), besides the RedisStore's for Hold. It is
// safe for concurrent use, and cheap enough to share one per process.
type Limiter struct {
	store Store // as given: what it can do beyond Store (tickets, holds) is asked of it
	cfg   config
	tel   *telemetry
	err   error                     // configuration error, returned by every call
	seam  seam                      // the store in the layers NewLimiter chose (stack): what every call goes through
	quick quickStore                // TryAcquire of a Limit without the seam, if stack allows it (memory_fast.go)
	memo  atomic.Pointer[limitMemo] // the last Limit the quick path checked, with its T

	adapts  adaptBook  // the adaptive limits it read and the successes it has yet to report (adaptive_report.go)
	flights flightBook // the samples of automatic in-flight bounds it has yet to report (flight.go)
}

// NewLimiter returns a Limiter over store. The options choose, once, the
// layers around the store that serve its calls (see stack in seam.go).
func NewLimiter(store Store, opts ...Option) *Limiter {
	c := newConfig(opts)
	l := &Limiter{store: store, cfg: c, tel: newTelemetry(c)}
	if err := checkPrefix(c.prefix); err != nil {
		l.err = err
	} else if store == nil {
		l.err = invalidf("NewLimiter: store is nil")
	} else if err := store.configErr(); err != nil {
		l.err = err
	} else {
		l.seam, l.quick, l.err = stack(l)
	}
	return l
}

// Bucket names one bucket in a multi-bucket call: N from Key under Limit,
// which may be any Policy (buckets of one call may mix them). A zero N means 1.
type Bucket struct {
	Key   string
	Limit Policy
	N     int
	// Share, if set, divides this bucket among tenants by weight (see
	// Share); at most one bucket of a call may have one.
	Share *Share
	// UpstreamSettle, for a token bucket (Limit, Adaptive), makes
	// Reservation.Settle give back what a job did not use as an upstream
	// that books the estimate up front and refunds the rest when it
	// answers does (an LLM API): at once, up to what the bucket lacks to be
	// full, while no booking's turn lies ahead of now and the bucket has no
	// holes, however long ago the booking was made. Without it, a settle
	// gives back only what the grants counted at their settled costs allow,
	// which is nothing once the booking has refilled by its own schedule
	// (see Settle). Other policies ignore it.
	UpstreamSettle bool
}

// Result is the outcome of TryAcquire.
type Result struct {
	Allowed    bool          // the tokens were taken
	Remaining  int           // tokens left (in the emptiest bucket)
	RetryAfter time.Duration // when not Allowed: how long until the same call would be
	ResetAfter time.Duration // how long until every bucket is full again
}

// check validates a request before any I/O and sets its key prefix.
func (l *Limiter) check(req *request) error {
	if l.err != nil {
		return l.err
	}
	req.prefix = l.cfg.prefix
	for i := 0; i < req.len(); i++ {
		b := req.at(i)
		if err := checkName(b.Key); err != nil {
			return err
		}
		a, err := asAlgo(b.Limit)
		if err != nil {
			return err
		}
		if err := a.check(b.N); err != nil {
			return err
		}
		b.Limit = a
		if _, ok := a.(Adaptive); ok {
			req.adapts++
		}
		if b.Share != nil {
			if err := req.setShare(b, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// setShare checks the Share of bucket b, the i-th (from 0) of req, and sets
// req.share. (Apart from check, so that a call without a Share allocates
// none.)
func (req *request) setShare(b *Bucket, i int) error {
	sh, err := checkShare(b)
	sh.at = int64(i + 1)
	switch {
	case err != nil:
		return err
	case req.share != nil:
		return invalidf("buckets %q and %q both have a Share: a call may share one bucket", req.share.bucket, b.Key)
	}
	req.share = &sh
	return nil
}

func multi(buckets []Bucket) (request, error) {
	switch len(buckets) {
	case 0:
		return request{}, invalidf("no buckets")
	case 1:
		return request{one: defaultN(buckets[0])}, nil
	}
	if err := checkSlot(buckets); err != nil {
		return request{}, err
	}
	more := make([]Bucket, len(buckets)-1)
	for i, b := range buckets[1:] {
		more[i] = defaultN(b)
	}
	return request{one: defaultN(buckets[0]), more: more}, nil
}

func defaultN(b Bucket) Bucket {
	if b.N == 0 {
		b.N = 1
	}
	return b
}

// Acquire takes n tokens from the bucket key under policy (a Limit, FixedWindow,
// SlidingLog, SlidingWindow or LeakyBucket), sleeping until they are granted.
//
// It returns at once with an error matching ErrInvalid for an invalid policy or
// an n the policy could never grant (n < 1, or more than its Burst, Max or
// Capacity: ErrTooLarge); with a *LimitedError if ctx has a deadline that the
// wait would pass, or if a LeakyBucket's queue is full; and with ctx's error if
// ctx ends while it sleeps, in which case the tokens go back to the bucket where
// the policy allows (see each policy).
func (l *Limiter) Acquire(ctx context.Context, key string, policy Policy, n int) error {
	return l.acquire(ctx, request{one: Bucket{Key: key, Limit: policy, N: n}})
}

// AcquireAll is Acquire over several buckets at once (say a tenant's and a
// global one), of any policies: it takes from every bucket or from none, in
// one store call, at the earliest time at which every bucket can grant, and
// each bucket counts the grant at that time. On Redis Cluster the buckets must share a hash tag, as in
// "{acct}:tenant:42" and "{acct}:global"; otherwise it fails with ErrCrossSlot
// before any I/O, on any Redis, so code that works on one server works on a cluster.
//
// A bucket with a Share is divided among tenants (see Share): a caller whose
// tenant is over its share sleeps until its place in its tenant's line and
// asks again, or fails at once with a *LimitedError (ErrOverShare) if that
// place is past ctx's deadline.
func (l *Limiter) AcquireAll(ctx context.Context, buckets []Bucket) error {
	req, err := multi(buckets)
	if err != nil {
		return err
	}
	return l.acquire(ctx, req)
}

func (l *Limiter) acquire(ctx context.Context, req request) error {
	ctx, span := l.tel.tracer.Start(ctx, "throttle.Acquire")
	defer span.End()
	dl, hasDeadline := ctx.Deadline()
	b, err := l.reserveShare(ctx, req, dl, hasDeadline)
	if err != nil {
		span.RecordError(err)
		return err
	}
	if b.d.wait == 0 && (!hasDeadline || !time.Now().After(dl)) {
		// Granted at once: what Reservation.wait does for a slot that has
		// come, without making one (an allocation the commonest call spares).
		l.tel.outcome(ctx, b.req.one.Key, outGranted)
		return nil
	}
	r := l.reservation(b)
	if hasDeadline && r.Time().After(dl) {
		// The budget was measured before the round trip; the slot, after it.
		// No sleeping just to fail: give the tokens back and say when to return.
		late := r.Delay()
		_ = r.Cancel(ctx)
		err = &LimitedError{RetryAfter: late}
		l.tel.outcome(ctx, req.one.Key, outDenied)
	}
	if err == nil {
		err = r.wait(ctx, span)
	}
	if err != nil {
		span.RecordError(err)
	}
	return err
}

// reserveShare reserves req for acquire, within ctx's deadline dl if it
// has one. A caller over its Share sleeps until its place in its tenant's
// line and asks again, unless the place is past dl.
func (l *Limiter) reserveShare(ctx context.Context, req request, dl time.Time, hasDeadline bool) (booking, error) {
	for {
		req.maxWait = maxSpan
		if hasDeadline {
			req.maxWait = min(maxSpan, max(0, int64(time.Until(dl)/time.Microsecond)))
		}
		b, err := l.book(ctx, req)
		if err == nil {
			return b, nil
		}
		var limited *LimitedError // on the heap (errors.As): only for a refusal
		if !errors.As(err, &limited) || !limited.OverShare || (hasDeadline && time.Until(dl) < limited.RetryAfter) {
			return b, err
		}
		t := time.NewTimer(limited.RetryAfter)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return booking{}, ctx.Err()
		}
	}
}

// TryAcquire takes n tokens from the bucket key if it can do so at once, and
// never waits. A refusal is not an error: res.Allowed is false and
// res.RetryAfter says when to come back.
func (l *Limiter) TryAcquire(ctx context.Context, key string, policy Policy, n int) (Result, error) {
	if p, ok := policy.(Limit); ok && l.quick != nil {
		if res, done := l.tryQuick(ctx, key, p, n); done {
			return res, nil
		}
	}
	return l.try(ctx, request{one: Bucket{Key: key, Limit: rebox(policy), N: n}})
}

// TryAcquireAll is TryAcquire over several buckets at once, all or nothing; see AcquireAll.
func (l *Limiter) TryAcquireAll(ctx context.Context, buckets []Bucket) (Result, error) {
	req, err := multi(buckets)
	if err != nil {
		return Result{}, err
	}
	return l.try(ctx, req)
}

func (l *Limiter) try(ctx context.Context, req request) (Result, error) {
	if err := l.check(&req); err != nil {
		l.tel.outcome(ctx, req.one.Key, outError)
		return Result{}, err
	}
	d, _, err := l.seam.reserve(ctx, req)
	if err != nil {
		return Result{}, err
	}
	res := Result{Allowed: d.granted, Remaining: d.remaining, ResetAfter: micros(d.reset)}
	if d.granted {
		l.tel.outcome(ctx, req.one.Key, outGranted)
	} else {
		res.RetryAfter = micros(d.wait)
		l.tel.outcome(ctx, req.one.Key, outDenied)
	}
	return res, nil
}

// Reserve takes n tokens from the bucket key now, for use after r.Delay(), if
// that delay is at most maxWait (a negative maxWait means no bound); otherwise
// it takes nothing and returns a *LimitedError. The caller then calls r.Wait,
// or acts after r.Delay() itself, or gives the tokens back with r.Cancel.
func (l *Limiter) Reserve(ctx context.Context, key string, policy Policy, n int, maxWait time.Duration) (*Reservation, error) {
	return l.reserve(ctx, request{one: Bucket{Key: key, Limit: policy, N: n}, maxWait: budget(maxWait)})
}

// ReserveAll is Reserve over several buckets at once, all or nothing; see AcquireAll.
func (l *Limiter) ReserveAll(ctx context.Context, buckets []Bucket, maxWait time.Duration) (*Reservation, error) {
	req, err := multi(buckets)
	if err != nil {
		return nil, err
	}
	req.maxWait = budget(maxWait)
	return l.reserve(ctx, req)
}

// budget is maxWait in µs; negative or beyond the span a bucket's state may
// reach (about three years), it is that span: no reservation is unbounded.
func budget(maxWait time.Duration) int64 {
	if maxWait < 0 || maxWait/time.Microsecond > maxSpan {
		return maxSpan
	}
	return int64(maxWait / time.Microsecond)
}

func (l *Limiter) reserve(ctx context.Context, req request) (*Reservation, error) {
	b, err := l.book(ctx, req)
	if err != nil {
		return nil, err
	}
	return l.reservation(b), nil
}

// booking is a grant before it is made a Reservation.
type booking struct {
	req request
	d   decision
}

func (l *Limiter) reservation(b booking) *Reservation { return newReservation(l, b.req, b.d) }

// book asks for req: a grant, or a *LimitedError if there is none in time.
func (l *Limiter) book(ctx context.Context, req request) (booking, error) {
	if err := l.check(&req); err != nil {
		l.tel.outcome(ctx, req.one.Key, outError)
		return booking{}, err
	}
	if err := ctx.Err(); err != nil {
		return booking{}, err
	}
	d, req, err := l.seam.reserve(ctx, req)
	if err != nil {
		return booking{}, err
	}
	if !d.granted {
		l.tel.outcome(ctx, req.one.Key, outDenied)
		return booking{}, &LimitedError{RetryAfter: micros(d.wait), OverShare: d.overShare}
	}
	return booking{req: req, d: d}, nil
}

// CooldownLeft reports how much of a cooldown put on the bucket key (by any
// process, through Cooldown) is left: 0 if there is none. Callers that
// reserved a turn before a cooldown began hold it regardless; this is how
// they can see the cooldown before they act on it.
func (l *Limiter) CooldownLeft(ctx context.Context, key string) (time.Duration, error) {
	if l.err != nil {
		return 0, l.err
	}
	if err := checkName(key); err != nil {
		return 0, err
	}
	return l.seam.cooldownLeft(ctx, l.cfg.prefix, key)
}

// Err reports the Limiter's configuration error (a bad key prefix, FailLocal
// without WithHosts, a nil store), which every call returns; nil if it has none.
// Check it once at start-up rather than on every call.
func (l *Limiter) Err() error { return l.err }

// Cooldown grants nothing from the bucket key under policy, to any process,
// for d; after that the bucket resumes at the policy's pace (a token bucket
// with one token first), so a fleet that was told to back off (an upstream
// 429 with Retry-After) comes back one caller at a time. Turns cancelled
// before it and not yet taken are voided. A cooldown never shortens one
// already in place; CooldownLeft and Peek see it whatever the policy. It
// returns how long until the bucket grants its next single unit. Under
// FailLocal in fallback mode, the cooldown holds for this process only (see
// FailLocal).
func (l *Limiter) Cooldown(ctx context.Context, key string, policy Policy, d time.Duration) (time.Duration, error) {
	b, err := l.bucketOf(key, policy)
	if err != nil {
		return 0, err
	}
	if d <= 0 || d > time.Duration(maxSpan)*time.Microsecond {
		return 0, invalidf("cooldown %v must be positive and at most %v", d, time.Duration(maxSpan)*time.Microsecond)
	}
	next, err := l.seam.cooldown(ctx, l.cfg.prefix, b, d)
	if err != nil {
		return 0, err
	}
	l.tel.cooldowns.Add(ctx, 1)
	return next, nil
}
