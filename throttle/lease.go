package throttle

import (
	"context"
	"sync"
	"time"
)

// Lease is a slot of a Concurrency semaphore, held from Hold until Release.
//
// While it is held, the Lease renews itself every Lease/3 from a goroutine
// that Hold starts and Release ends (and waits for); besides it, only a
// RedisStore's pub/sub reader runs in this package, while Holds wait. If the holder's process dies the
// renewals stop and the slot comes back once the lease runs out. If a renewal
// finds the lease gone (it ran out during a long GC pause or a partition, and
// the slot may have gone to another holder), or the store cannot confirm it
// before it runs out, Lost is closed: the holder is no longer counted and
// should stop the work the slot guards.
//
// Release must be called, also after Lost; it is idempotent and safe for
// concurrent use, as are the other methods.
type Lease struct {
	h    *holdCall // nil: a lease that holds nothing (FailOpen)
	key  string
	lost chan struct{}

	stop     context.CancelFunc // called by Release: renewals end, one in flight too
	ended    chan struct{}      // closed when the renewing goroutine has returned
	lostOnce sync.Once

	mu       sync.Mutex // one Release at a time; guards the sample too
	released bool

	granted    time.Time     // when Hold returned it
	observed   bool          // Observe reported a sample
	latency    time.Duration // Observe's
	overloaded bool          // Observe's
}

// newLease returns the lease h was granted and starts its renewals.
func newLease(h *holdCall) *Lease {
	ctx, stop := context.WithCancel(context.Background())
	l := &Lease{h: h, key: h.key, lost: make(chan struct{}), stop: stop, ended: make(chan struct{}), granted: time.Now()}
	// The store granted the lease after its ask began, so the lease runs
	// until after then + Lease; a tenth less allows for clock rates.
	go l.renew(ctx, h.asked.Add(h.lease-h.lease/10))
	return l
}

// Lost is closed if the lease is lost while held: a renewal found it gone, or
// the store could not confirm it before it ran out. It is never closed by
// Release, and never for a lease that FailOpen granted.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Release gives the slot back and wakes a waiter for it, and ends the
// renewals. Only the first successful call does anything; a call that fails
// (the store is down) may be repeated, and if none succeeds the slot comes
// back when its lease runs out. If ctx has already ended, the store call gets
// a context of its own, bounded by the Limiter's refund timeout
// (100 ms), so that a deferred Release still gives the slot back.
func (l *Lease) Release(ctx context.Context) error {
	if l.h == nil {
		return nil
	}
	l.stop()
	<-l.ended
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), l.h.owner.cfg.refundTimeout)
		defer cancel()
	}
	if _, err := l.h.hs.release(ctx, l.h.prefix, l.h.key, l.h.id); err != nil {
		l.h.owner.tel.storeError(ctx, "release")
		return err
	}
	l.released = true
	if l.h.auto > 0 {
		latency, over := l.sample()
		l.h.owner.observeFlight(ctx, l.h, latency, over)
	}
	return nil
}

// renew extends the lease every Lease/3 until Release ends ctx. A store
// that cannot answer is asked again sooner, until the lease would have run
// out (ends, local time): then the lease is lost.
func (l *Lease) renew(ctx context.Context, ends time.Time) {
	defer close(l.ended)
	h := l.h
	every := h.lease / 3
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !time.Now().Before(ends) {
			l.markLost()
			return
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, min(every, time.Until(ends)))
		ok, err := h.hs.renew(rctx, h.prefix, h.key, int64(h.lease/time.Microsecond), h.id)
		cancel()
		switch {
		case ctx.Err() != nil: // released meanwhile
			return
		case err == nil && ok:
			ends = start.Add(h.lease - h.lease/10) // as in newLease
			t.Reset(every)
		case err == nil:
			l.markLost()
			return
		default:
			h.owner.tel.storeError(ctx, "renew")
			t.Reset(min(every/4, max(time.Until(ends), 0)))
		}
	}
}

func (l *Lease) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }
