package throttle

import (
	"context"
	"time"
)

// Limiter takes tokens from buckets kept in a Store. Most callers want Acquire,
// which blocks until the tokens are theirs; TryAcquire never waits; Reserve
// books tokens now and lets the caller decide when to wait. The *All forms take
// several buckets at once, all or nothing.
//
// A Limiter holds no bucket state of its own, except the local buckets of
// FailLocal, and starts no goroutines (but see Hold); it is safe for concurrent use, and cheap
// enough to share one per process.
type Limiter struct {
	store Store
	cfg   config
	tel   *telemetry
	fb    *fallback // FailLocal's mode and local bucket; nil under other policies
	err   error     // configuration error, returned by every call
}

// NewLimiter returns a Limiter over store.
func NewLimiter(store Store, opts ...Option) *Limiter {
	c := newConfig(opts)
	l := &Limiter{store: store, cfg: c, tel: newTelemetry(c)}
	if err := checkPrefix(c.prefix); err != nil {
		l.err = err
	} else if store == nil {
		l.err = invalidf("NewLimiter: store is nil")
	} else if c.failure == FailLocal {
		l.fb, l.err = newFallback(c, l.tel)
	}
	return l
}

// Bucket names one bucket in a multi-bucket call: N tokens from Key under Limit.
// A zero N means 1.
type Bucket struct {
	Key   string
	Limit Limit
	N     int

	t int64 // Limit.interval(), set once a request is checked
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
		if req.pol != nil {
			if err := req.pol.check(b.N); err != nil {
				return err
			}
			continue
		}
		t, err := b.Limit.check(b.N)
		if err != nil {
			return err
		}
		b.t = t
	}
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
	req, err := policyRequest(key, policy, n)
	if err != nil {
		return err
	}
	return l.acquire(ctx, req)
}

// AcquireAll is Acquire over several buckets at once (say a tenant's and a
// global one): it takes every bucket's tokens or none, and waits for the
// slowest. On Redis Cluster the buckets must share a hash tag, as in
// "{acct}:tenant:42" and "{acct}:global"; otherwise it fails with ErrCrossSlot
// before any I/O, on any Redis, so code that works on one server works on a cluster.
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
	req.maxWait = maxSpan
	dl, hasDeadline := ctx.Deadline()
	if hasDeadline {
		req.maxWait = min(maxSpan, max(0, int64(time.Until(dl)/time.Microsecond)))
	}
	r, err := l.reserve(ctx, req)
	if err == nil && hasDeadline && r.Time().After(dl) {
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

// TryAcquire takes n tokens from the bucket key if it can do so at once, and
// never waits. A refusal is not an error: res.Allowed is false and
// res.RetryAfter says when to come back.
func (l *Limiter) TryAcquire(ctx context.Context, key string, policy Policy, n int) (Result, error) {
	req, err := policyRequest(key, policy, n)
	if err != nil {
		return Result{}, err
	}
	return l.try(ctx, req)
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
	d, _, err := l.decide(ctx, &req)
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
	req, err := policyRequest(key, policy, n)
	if err != nil {
		return nil, err
	}
	req.maxWait = budget(maxWait)
	return l.reserve(ctx, req)
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
	if err := l.check(&req); err != nil {
		l.tel.outcome(ctx, req.one.Key, outError)
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d, owner, err := l.decide(ctx, &req)
	if err != nil {
		return nil, err
	}
	if !d.granted {
		l.tel.outcome(ctx, req.one.Key, outDenied)
		return nil, &LimitedError{RetryAfter: micros(d.wait)}
	}
	return newReservation(owner, req, d), nil
}

// decide asks the store, applying the failure policy when it cannot answer:
// FailClosed returns the store's error, FailOpen grants, and FailLocal answers
// from the local bucket, as it does without asking the store while it is in
// fallback mode (fallback.go). The Limiter returned owns any reservation made
// from the decision: l, or for a local decision the Limiter over the local
// store, in which case *req has become the request that store answered.
func (l *Limiter) decide(ctx context.Context, req *request) (decision, *Limiter, error) {
	local, probe := l.fb.begin()
	if local {
		return l.fb.decide(ctx, req, l.fb.lastCause())
	}
	start := callStart(ctx)
	d, err := l.store.reserve(ctx, *req)
	v := judge(ctx, start, err)
	l.fb.end(probe, v, err)
	if err == nil {
		return d, l, nil
	}
	if v == answered { // the request was refused, say CROSSSLOT
		l.tel.outcome(ctx, req.one.Key, outError)
		return decision{}, nil, err
	}
	l.tel.storeError(ctx, "reserve")
	if v == failed {
		switch l.cfg.failure {
		case FailOpen:
			l.tel.failOpen.Add(ctx, 1)
			l.tel.outcome(ctx, req.one.Key, outFailOpen)
			return decision{granted: true, remaining: 0}, l, nil
		case FailLocal:
			return l.fb.decide(ctx, req, err)
		}
	}
	l.tel.outcome(ctx, req.one.Key, outError)
	return decision{}, nil, err
}

// cooldown puts a cooldown on b in the store, applying the failure policy as
// decide does: under FailLocal, a store that cannot answer, or fallback mode,
// puts it on the local bucket instead.
func (l *Limiter) cooldown(ctx context.Context, b Bucket, d time.Duration) (time.Duration, error) {
	local, probe := l.fb.begin()
	if local {
		return l.fb.cooldown(ctx, l.cfg.prefix, b, d, l.fb.lastCause())
	}
	start := callStart(ctx)
	next, err := l.store.cooldown(ctx, l.cfg.prefix, b, d)
	v := judge(ctx, start, err)
	l.fb.end(probe, v, err)
	if err == nil {
		return next, nil
	}
	l.tel.storeError(ctx, "cooldown")
	if v == failed && l.cfg.failure == FailLocal {
		return l.fb.cooldown(ctx, l.cfg.prefix, b, d, err)
	}
	return 0, err
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
	local, probe := l.fb.begin()
	if local {
		return l.fb.local.store.cooldownLeft(ctx, l.cfg.prefix, key)
	}
	start := callStart(ctx)
	left, err := l.store.cooldownLeft(ctx, l.cfg.prefix, key)
	v := judge(ctx, start, err)
	l.fb.end(probe, v, err)
	if err != nil {
		l.tel.storeError(ctx, "cooldown")
		if v == failed && l.cfg.failure == FailLocal {
			return l.fb.local.store.cooldownLeft(ctx, l.cfg.prefix, key)
		}
	}
	return left, err
}

// Err reports the Limiter's configuration error (a bad key prefix, FailLocal
// without WithHosts, a nil store), which every call returns; nil if it has none.
// Check it once at start-up rather than on every call.
func (l *Limiter) Err() error { return l.err }

// Cooldown grants nothing from the bucket key, to any process, for d; after
// that the bucket resumes at limit's pace, one token first, so a fleet that was
// told to back off (an upstream 429 with Retry-After) comes back one caller at
// a time. A cooldown never shortens one already in place. It returns how long
// until the bucket's next token. Under FailLocal in fallback mode, the cooldown
// holds for this process only (see FailLocal).
func (l *Limiter) Cooldown(ctx context.Context, key string, limit Limit, d time.Duration) (time.Duration, error) {
	if l.err != nil {
		return 0, l.err
	}
	if err := checkName(key); err != nil {
		return 0, err
	}
	if err := limit.Validate(); err != nil {
		return 0, err
	}
	if d <= 0 || d > time.Duration(maxSpan)*time.Microsecond {
		return 0, invalidf("cooldown %v must be positive and at most %v", d, time.Duration(maxSpan)*time.Microsecond)
	}
	next, err := l.cooldown(ctx, Bucket{Key: key, Limit: limit, N: 1}, d)
	if err != nil {
		return 0, err
	}
	l.tel.cooldowns.Add(ctx, 1)
	return next, nil
}
