package throttle

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Reservation is tokens taken from one or more buckets for use at a given time:
// its slot. Between now and then the tokens are the reservation's, and a
// reservation that will not be used should be cancelled so they go back.
// Methods are safe for concurrent use.
type Reservation struct {
	lim *Limiter
	req request
	d   decision
	at  time.Time // local time of the slot

	mu        sync.Mutex
	done      bool   // waited out, cancelled or settled: Cancel does nothing
	cancelled bool   // Cancel gave the turn back: Settle does nothing
	settled   []bool // by bucket, once Settle has charged it
}

func newReservation(l *Limiter, req request, d decision) *Reservation {
	req.took(d)
	return &Reservation{lim: l, req: req, d: d, at: time.Now().Add(micros(d.wait))}
}

// AdaptiveRate is the effective rate, per its ceiling's Period, at which
// the call's first Adaptive bucket was taken; 0 if the call had none.
func (r *Reservation) AdaptiveRate() float64 {
	for i := 0; i < r.req.len(); i++ {
		if f, ok := r.req.at(i).Limit.(fixedTB); ok {
			return f.rate()
		}
	}
	return 0
}

// Delay is how long from now until the reservation's slot; 0 once it has come.
func (r *Reservation) Delay() time.Duration {
	return max(0, time.Until(r.at))
}

// Time is when the reservation's slot comes, on this process's clock.
func (r *Reservation) Time() time.Time { return r.at }

// Slot is the reservation's slot on the store's clock (Redis's TIME, or the
// memory store's clock): the instant the buckets granted its tokens for.
// Every slot of a bucket is on that one clock, whichever process booked it,
// so the slots of a bucket never hold more than its policy allows in any
// span; Time, on this process's clock, moves with the round trip's latency.
// It is the zero Time for a reservation no store decided (FailOpen let it
// through), and on the local clock for one FailLocal granted in process.
func (r *Reservation) Slot() time.Time {
	if r.d.now == 0 {
		return time.Time{}
	}
	return time.UnixMicro(r.d.slot())
}

// Wait sleeps until the reservation's slot and returns nil. If ctx ends first,
// Wait cancels the reservation (its tokens go back) and returns ctx's error,
// at most the Limiter's refund timeout (100 ms) after ctx ended: the store
// call that gives the tokens back runs after ctx ended. A refund that does
// not finish in time is lost, which only wastes tokens, never grants extra
// ones.
func (r *Reservation) Wait(ctx context.Context) error {
	return r.wait(ctx, nil)
}

func (r *Reservation) wait(ctx context.Context, span trace.Span) error {
	key := r.req.one.Key
	delay := r.Delay()
	if delay == 0 {
		r.finish()
		o := outGranted
		if r.d.wait > 0 {
			o = outWaited
			r.lim.tel.waited(ctx, key, micros(r.d.wait))
		}
		r.lim.tel.outcome(ctx, key, o)
		return nil
	}
	if span != nil {
		span.AddEvent("wait", trace.WithAttributes(attribute.Int64("sluice.wait_us", int64(delay/time.Microsecond))))
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		r.finish()
		r.lim.tel.waited(ctx, key, micros(r.d.wait))
		r.lim.tel.outcome(ctx, key, outWaited)
		return nil
	case <-ctx.Done():
		r.lim.tel.outcome(ctx, key, outCanceled)
		// The caller's ctx is over; the refund gets a short one of its own.
		_ = r.Cancel(context.WithoutCancel(ctx))
		return ctx.Err()
	}
}

func (r *Reservation) finish() {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
}

// Cancel gives the reservation's turn back if its slot has not come, so that
// a later caller can have it, whatever the order in which reservations are
// cancelled: in each bucket, the latest booking is undone exactly; one that
// later bookings stand on leaves its turn (its n, at its slot) to the next
// callers, who take it instead of waiting behind the later ones, for as long
// as the policy lets a turn move (the instant of the slot for a token bucket,
// a leaky bucket and a sliding log; the rest of the window or slot for the
// window counters). What a policy promises still holds: the grants that stand
// are ones it admitted. At most once however often Cancel is called or the
// store call is retried. After the slot, or after Wait returned nil, Cancel
// does nothing. The store call is bounded by the Limiter's refund timeout.
func (r *Reservation) Cancel(ctx context.Context) error {
	r.mu.Lock()
	if r.done || r.d.wait == 0 {
		r.done = true
		r.mu.Unlock()
		return nil
	}
	r.done = true
	if r.Delay() == 0 {
		r.mu.Unlock()
		return nil
	}
	r.cancelled = true
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, r.lim.cfg.refundTimeout)
	defer cancel()
	ok, err := r.lim.seam.refund(ctx, r.req, r.d, newID())
	if err != nil {
		r.lim.tel.storeError(ctx, "refund")
		return err
	}
	if ok {
		r.lim.tel.refunds.Add(ctx, 1)
	}
	return nil
}

// Settle charges the reservation's bucket key what the job really used, n,
// instead of the tokens it took (its Bucket's N): the answer of an LLM call
// says how many tokens it used, where the reservation took its max_tokens.
// The difference goes back to the bucket, for the next callers at once, or,
// if n is more, is taken on top: a debt the next grants wait for, never the
// settled job. n may be 0, and more than the bucket's burst.
//
// What a policy promises holds counting each grant at its settled cost, so a
// bucket may get back less than the difference: a token or leaky bucket gets
// it all while the reservation is its latest booking, and under later ones
// what its booking has not refilled yet (less the later bookings' turns), so
// the sooner after its slot, the more; a fixed window only while the slot's
// window is the one the bucket counts; a sliding window or log only while it
// keeps the slot or entries (docs/throttle-design.md has each policy's rule).
//
// Each bucket of a reservation is settled at most once, however often Settle
// is called or the store call retried; a bucket of a call that took several
// is settled alone (a request bucket of cost 1 and a token bucket settled by
// the answer). Settle after Cancel gave the turn back does nothing, and
// Cancel after Settle does nothing. A key that is none of the reservation's
// buckets, or an n below 0 or above 2^30, is an error matching ErrInvalid.
// The store call is bounded by the Limiter's refund timeout.
func (r *Reservation) Settle(ctx context.Context, key string, n int) error {
	if n < 0 || n > maxBurst {
		return invalidf("settle: n %d must be from 0 to %d", n, maxBurst)
	}
	i := 0
	for i < r.req.len() && r.req.at(i).Key != key {
		i++
	}
	if i == r.req.len() {
		return invalidf("settle: %q is not a bucket of the reservation", key)
	}
	r.mu.Lock()
	if r.cancelled || (r.settled != nil && r.settled[i]) {
		r.mu.Unlock()
		return nil
	}
	if r.settled == nil {
		r.settled = make([]bool, r.req.len())
	}
	r.settled[i], r.done = true, true
	r.mu.Unlock()
	b := r.req.at(i)
	if n == b.N || r.d.now == 0 { // nothing to settle, or no store decided it (FailOpen)
		return nil
	}
	req := request{prefix: r.req.prefix, one: *b}
	d := decision{granted: true, local: r.d.local, wait: r.d.wait, now: r.d.now, handle: r.d.handleAt(i)}
	ctx, cancel := context.WithTimeout(ctx, r.lim.cfg.refundTimeout)
	defer cancel()
	ok, err := r.lim.seam.charge(ctx, req, d, n, newID())
	if err != nil {
		r.lim.tel.storeError(ctx, "settle")
		return err
	}
	if ok {
		r.lim.tel.settles.Add(ctx, 1)
	}
	return nil
}

// newID names one refund, so a retried refund command is recognised.
func newID() string {
	var b [8]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return hex.EncodeToString(b[:])
}
