package throttle

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Concurrency is a distributed semaphore: at most Max holders of a key at
// once, across every process that shares the store. A holder gets a *Lease,
// which it gives back with Release; a holder whose process dies stops
// renewing its lease, and its slot comes back when the lease runs out, so a
// crashed worker never keeps a slot for longer than Lease.
//
// Concurrency is not a Policy: it bounds what is in flight, not a rate, and
// is used through Limiter.Hold and Limiter.TryHold, not Acquire.
//
// The zero Lease means 30 s. Max must be from 1 to 1<<20, and Lease
// from 100 ms to 24 h: a shorter lease costs a store call every Lease/3 per
// holder, a longer one keeps a dead holder's slot longer.
//
// With Auto, the bound follows the latency the holders observe: it is kept
// in the store beside the slots, shared by every process, and moved by a
// gradient law on the fleet's recent against its baseline latency (and
// lowered on overload answers) between Floor and Max, the ceiling; see
// docs/adaptive.md. Each Lease reports its latency and outcome when it is
// released (Lease.Observe); Limiter.InFlight reads the bound.
type Concurrency struct {
	Max   int           // the most holders at once; with Auto, the ceiling (0 means 1000)
	Lease time.Duration // how long a slot outlives its holder's last renewal; 0 means 30 s
	// Auto makes the bound follow the upstream's latency, from Floor to Max.
	Auto bool
	// Floor is the least bound under Auto; 0 means 1. The bound starts there.
	Floor int
	// Interval is how often, at most, the fleet's bound moves under Auto:
	// each move is computed from the samples of one window of it. 0 means
	// 250 ms; from 10 ms to 1 min.
	Interval time.Duration
}

const (
	// defaultLease is the lease of a Concurrency whose Lease is 0.
	defaultLease = 30 * time.Second
	// minLease and maxLease bound Concurrency.Lease.
	minLease = 100 * time.Millisecond
	maxLease = 24 * time.Hour
	// maxHolders bounds Concurrency.Max.
	maxHolders = 1 << 20
	// autoCeiling is the ceiling of an automatic bound whose Max is 0.
	autoCeiling = 1000
	// defaultInterval, minFlightInterval and maxFlightInterval are Concurrency.Interval's.
	defaultInterval   = 250 * time.Millisecond
	minFlightInterval = 10 * time.Millisecond
	maxFlightInterval = time.Minute
)

func (c Concurrency) lease() time.Duration {
	if c.Lease == 0 {
		return defaultLease
	}
	return c.Lease
}

// ceiling is the most slots c ever grants: Max, or under Auto without Max, autoCeiling.
func (c Concurrency) ceiling() int {
	if c.Auto && c.Max == 0 {
		return autoCeiling
	}
	return c.Max
}

// floor is the least bound under Auto.
func (c Concurrency) floor() int { return max(c.Floor, 1) }

func (c Concurrency) interval() time.Duration {
	if c.Interval == 0 {
		return defaultInterval
	}
	return c.Interval
}

// Validate reports why c cannot be used, or nil.
func (c Concurrency) Validate() error {
	if c.Auto {
		if err := c.validateAuto(); err != nil {
			return err
		}
	} else if c.Floor != 0 || c.Interval != 0 {
		return invalidf("floor %d and interval %v are for an automatic bound (Auto)", c.Floor, c.Interval)
	}
	switch {
	case c.Auto && c.Max == 0:
	case c.Max < 1:
		return invalidf("max %d must be at least 1", c.Max)
	case c.Max > maxHolders:
		return invalidf("max %d is larger than %d", c.Max, maxHolders)
	case c.Lease < 0:
		return invalidf("lease %v must not be negative (0 means %v)", c.Lease, defaultLease)
	case c.Lease != 0 && c.Lease < minLease:
		return invalidf("lease %v is shorter than %v: it would be renewed every %v", c.Lease, minLease, c.Lease/3)
	case c.Lease > maxLease:
		return invalidf("lease %v is longer than %v", c.Lease, maxLease)
	}
	return nil
}

// describe says what c bounds, for messages: "at most 5 in flight, lease 30s".
func (c Concurrency) describe() string {
	if c.Auto {
		return fmt.Sprintf("in flight from %d to %d by latency, lease %v", c.floor(), c.ceiling(), c.lease())
	}
	return fmt.Sprintf("at most %d in flight, lease %v", c.Max, c.lease())
}

// holdStore is what Hold needs of a store, beyond the sealed Store interface:
// *RedisStore and *memoryStore implement it (redis_hold.go, memory_hold.go),
// held to one conformance table. Times are µs of the store's clock.
type holdStore interface {
	// hold takes a slot of the semaphore key under prefix for id, until now +
	// lease, if fewer than max leases are held (see hold.lua); with auto > 0
	// max is the ceiling of the key's automatic bound, and auto its start.
	hold(ctx context.Context, prefix, key string, max int, lease int64, id string, auto int) (holdReply, error)
	// renew extends id's lease to now + lease; false if it had run out or was released.
	renew(ctx context.Context, prefix, key string, lease int64, id string) (bool, error)
	// release frees id's slot and wakes a waiter; false if it held none.
	release(ctx context.Context, prefix, key, id string) (bool, error)
	// waiters is where this process's blocked Holds on the store wait.
	waiters() *waitRoom
}

// holdReply is a store's answer to hold.
type holdReply struct {
	granted bool
	wait    int64 // denied: µs until enough leases run out for a slot, if none is renewed or released
	held    int   // leases held after the call
	now     int64 // the store's time of the decision, µs
	expired int   // leases that had run out, removed by the call: slots freed without a release
	max     int   // the bound the call applied: the ceiling, or an automatic bound's
}

// unannounced is how many of the slots left free after a grant no release
// announced: those freed by leases that ran out. Waiters are woken for them.
func (r holdReply) unannounced() int { return max(0, min(r.max-r.held, r.expired)) }

// semKey is the store key of the semaphore name under prefix: the name's
// hash tag is kept, so a semaphore lives in its name's Cluster slot.
func semKey(prefix, name string) string { return redisKey(prefix, name) + ":sem" }

// holdCall is one Hold: the semaphore, the lease id, and the store and
// Limiter that own the lease (l, or FailLocal's local Limiter).
type holdCall struct {
	owner  *Limiter
	hs     holdStore
	prefix string
	key    string
	max    int
	lease  time.Duration
	id     string
	asked  time.Time   // when the latest ask began: no later than the store's grant
	c      Concurrency // as Hold was given it
	auto   int         // under c.Auto, the bound while the store has none (c's floor); else 0
}

func (h *holdCall) ask(ctx context.Context) (holdReply, error) {
	h.asked = time.Now()
	return h.hs.hold(ctx, h.prefix, h.key, h.max, int64(h.lease/time.Microsecond), h.id, h.auto)
}

// Hold takes a slot of the semaphore key under c, waiting until one is free,
// and returns the Lease that holds it; the caller must Release it. While held,
// the Lease renews itself every c.Lease/3 from a goroutine of its own, which
// Release ends. That, and a RedisStore's pub/sub reader while Holds wait
// (ended by Close), are the exceptions to this package starting no goroutines.
// If a renewal finds the lease gone, Lost is closed, and the holder should stop.
//
// A blocked Hold waits without polling: a release anywhere in the fleet
// wakes this process's longest-waiting Hold of the key (on a RedisStore
// through one pub/sub subscription per store, see RedisStore), and the
// longest-waiting one also wakes when the earliest lease would run out, so
// that the slot of a holder that died is taken over within its lease. In one
// process, blocked Holds of a key are served in arrival order; across
// processes, a freed slot goes to the waiter that asks first.
//
// The semaphore is kept under the Limiter's key prefix, apart from buckets of
// the same name, and keeps key's Redis Cluster hash tag.
//
// It returns at once with an error matching ErrInvalid for an invalid c or
// key, or a store that cannot hold slots, before any I/O; with ctx's error if
// ctx ends while it waits; and with a store error as the Limiter's failure
// policy says: FailClosed returns it, FailOpen returns a Lease that holds
// nothing, and FailLocal holds a slot of this host's share of c.Max,
// max(1, Max/hosts), in the Limiter's local store.
func (l *Limiter) Hold(ctx context.Context, key string, c Concurrency) (*Lease, error) {
	return l.hold(ctx, key, c, true)
}

// TryHold is Hold without the wait: if no slot is free it takes nothing and
// returns a *LimitedError whose RetryAfter is the time until the earliest
// lease runs out, if it is not renewed (a release may free a slot sooner).
func (l *Limiter) TryHold(ctx context.Context, key string, c Concurrency) (*Lease, error) {
	return l.hold(ctx, key, c, false)
}

func (l *Limiter) hold(ctx context.Context, key string, c Concurrency, wait bool) (*Lease, error) {
	ctx, span := l.tel.tracer.Start(ctx, "throttle.Hold")
	defer span.End()
	h, err := l.checkHold(key, c)
	if err != nil {
		l.tel.outcome(ctx, key, outError)
		span.RecordError(err)
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lease, err := l.seam.hold(ctx, h, wait)
	if err != nil {
		span.RecordError(err)
	}
	return lease, err
}

// checkHold validates a Hold before any I/O.
func (l *Limiter) checkHold(key string, c Concurrency) (*holdCall, error) {
	if l.err != nil {
		return nil, l.err
	}
	if err := checkName(key); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	hs, ok := l.store.(holdStore)
	if !ok {
		return nil, invalidf("store %T cannot hold slots: use a RedisStore or NewMemoryStore", l.store)
	}
	h := &holdCall{owner: l, hs: hs, prefix: l.cfg.prefix, key: key, max: c.ceiling(), lease: c.lease(), id: newLeaseID(), c: c}
	if c.Auto {
		if _, ok := l.store.(flightStore); !ok {
			return nil, invalidf("store %T cannot keep an automatic bound: use a RedisStore or NewMemoryStore", l.store)
		}
		h.auto = c.floor()
	}
	return h, nil
}

// hold holds a slot in the store, applying the failure policy as reserve
// does; under FailLocal in fallback mode it goes straight to the local store.
func (g *failure) hold(ctx context.Context, h *holdCall, wait bool) (*Lease, error) {
	local, probe := g.fb.begin()
	if local {
		return g.holdLocal(ctx, h, wait, g.fb.lastCause())
	}
	begun := time.Now()
	room := h.hs.waiters()
	if wait && !probe {
		// Holds of this key already wait here: the key is full. Queue behind
		// them without asking the store, and keep their order.
		if w := room.enter(semKey(h.prefix, h.key)); w != nil {
			return g.await(ctx, h, w, false, begun)
		}
	}
	start := callStart(ctx)
	r, err := h.ask(ctx)
	if err != nil {
		return g.holdFailed(ctx, h, wait, g.settle(ctx, start, probe, "hold", err), err)
	}
	g.settle(ctx, start, probe, "hold", nil)
	return g.answered(ctx, h, r, wait, begun)
}

// answered handles the reply to a Hold's first ask.
func (g *failure) answered(ctx context.Context, h *holdCall, r holdReply, wait bool, begun time.Time) (*Lease, error) {
	if r.granted {
		g.tel.outcome(ctx, h.key, outGranted)
		h.hs.waiters().granted(nil, semKey(h.prefix, h.key), r.unannounced())
		return newLease(h), nil
	}
	if !wait {
		g.tel.outcome(ctx, h.key, outDenied)
		return nil, &LimitedError{RetryAfter: micros(r.wait)}
	}
	trace.SpanFromContext(ctx).AddEvent("wait")
	w, again := h.hs.waiters().join(semKey(h.prefix, h.key), localTime(r.wait))
	return g.await(ctx, h, w, again, begun)
}

// await waits for w's turn to ask and asks (at once if asking), until a
// slot is granted, ctx ends, or the store fails. Nothing polls: w asks again
// only when a release wakes it or, at the head of the queue, when the
// earliest lease runs out.
func (g *failure) await(ctx context.Context, h *holdCall, w *holdWaiter, asking bool, begun time.Time) (*Lease, error) {
	room := h.hs.waiters()
	for {
		if !asking {
			if err := room.wait(ctx, w); err != nil {
				room.leave(w)
				g.tel.outcome(ctx, h.key, outCanceled)
				return nil, err
			}
		}
		start := callStart(ctx)
		r, err := h.ask(ctx)
		if err != nil {
			room.leave(w)
			if ctx.Err() != nil {
				g.forget(ctx, h)
				g.tel.outcome(ctx, h.key, outCanceled)
				return nil, ctx.Err()
			}
			return g.holdFailed(ctx, h, true, g.settle(ctx, start, false, "hold", err), err)
		}
		if r.granted {
			room.granted(w, semKey(h.prefix, h.key), r.unannounced())
			g.tel.waited(ctx, h.key, time.Since(begun))
			g.tel.outcome(ctx, h.key, outWaited)
			return newLease(h), nil
		}
		// Ask again at once if a release came while it asked: the ask may have missed it.
		asking = room.denied(w, localTime(r.wait))
	}
}

// holdFailed applies the failure policy to a Hold whose store call failed.
func (g *failure) holdFailed(ctx context.Context, h *holdCall, wait bool, v verdict, err error) (*Lease, error) {
	g.forget(ctx, h)
	if v == failed {
		switch g.cfg.failure {
		case FailOpen:
			g.tel.failOpen.Add(ctx, 1)
			g.tel.outcome(ctx, h.key, outFailOpen)
			return &Lease{key: h.key, lost: make(chan struct{})}, nil
		case FailLocal:
			return g.holdLocal(ctx, h, wait, err)
		}
	}
	g.tel.outcome(ctx, h.key, outError)
	return nil, err
}

// forget gives back a slot that a failed or cut-short hold call may still
// have taken (a timed-out script can run after the client gave up), bounded
// by the refund timeout; if that fails too, the slot comes back when its
// lease runs out, as it was never renewed.
func (g *failure) forget(ctx context.Context, h *holdCall) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.refundTimeout)
	defer cancel()
	_, _ = h.hs.release(rctx, h.prefix, h.key, h.id)
}

// holdLocal holds a slot in FailLocal's local store, at this host's share of
// the semaphore, standing in for the store failure cause.
func (g *failure) holdLocal(ctx context.Context, h *holdCall, wait bool, cause error) (*Lease, error) {
	n := g.fb.hosts()
	if n < 1 {
		g.tel.outcome(ctx, h.key, outError)
		return nil, fmt.Errorf("%w; local fallback: the number of hosts is unknown (%d)", cause, n)
	}
	mem := g.fb.mem
	lh := &holdCall{owner: h.owner, hs: mem, prefix: h.prefix, key: h.key, max: max(1, h.max/n), lease: h.lease, id: h.id, c: h.c}
	if h.auto > 0 {
		// The fleet's bound as this process last read it, its share.
		lh.max = max(1, h.owner.flights.lastBound(h.key, h.auto)/n)
	}
	begun := time.Now()
	if wait {
		if w := mem.waiters().enter(semKey(lh.prefix, lh.key)); w != nil {
			lease, err := g.await(ctx, lh, w, false, begun)
			return g.countLocal(ctx, lease, err)
		}
	}
	lh.asked = time.Now()
	r := mem.holdNow(lh.prefix, lh.key, lh.max, int64(lh.lease/time.Microsecond), lh.id, 0)
	lease, err := g.answered(ctx, lh, r, wait, begun)
	return g.countLocal(ctx, lease, err)
}

// countLocal counts a slot held by FailLocal's local store.
func (g *failure) countLocal(ctx context.Context, lease *Lease, err error) (*Lease, error) {
	if err == nil {
		g.tel.fallback.Add(ctx, 1)
	}
	return lease, err
}

// localTime is the local time wait µs from now: when a store's wait, measured
// from its reply, runs out here.
func localTime(wait int64) time.Time { return time.Now().Add(micros(wait)) }

// newLeaseID names one lease: random, so that holders never collide.
func newLeaseID() string {
	var b [12]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return hex.EncodeToString(b[:])
}
