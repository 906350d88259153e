package throttle

import (
	"context"
	"slices"
	"sync"
	"time"
)

// waitRoom is where one store's blocked Holds wait in this process: a queue
// per semaphore, first come first served. A waiter asks the store again only
// when it has a reason to:
//
//   - a release of the key (notify): the longest-waiting waiter that is not
//     already asking is woken; if every waiter is asking, one of them asks
//     again once its ask comes back denied, since it may have run before the
//     release;
//   - the earliest lease running out: only the head of the queue keeps a
//     timer, so a dead holder's slot costs one ask per process, not one per
//     waiter;
//   - a grant that finds slots freed by leases that ran out: a waiter is
//     woken for each one left free (a released slot has its own wake);
//   - releases becoming audible (ready): on a RedisStore, once the key's
//     pub/sub channel is subscribed, every waiter asks again, since a release
//     published before then was not heard.
//
// A Hold that finds others of its process waiting for the key queues behind
// them without asking (enter), unless a freed slot is kept for it: one that
// came when every waiter was already bound to ask. A waiter that leaves with
// a wake it did not use, or an ask it did not finish, passes it on.
type waitRoom struct {
	mu     sync.Mutex
	queues map[string]*waitQueue
	heard  bool // releases are heard as soon as a queue exists (a memory store's own)
	// watch, if set, is called outside mu after a queue is made or removed,
	// and must not block: a RedisStore has its subscription to the key's
	// channel follow, from a goroutine of its own.
	watch func(name string)
}

type waitQueue struct {
	name  string
	ws    []*holdWaiter // in arrival order
	ready bool          // releases of the key are heard
	until time.Time     // when the earliest lease runs out, as the latest denied ask saw it
	spare int           // freed slots no waiter was free to take: the next to enter asks
}

// holdWaiter is one blocked Hold. Its fields are guarded by the room's mu.
type holdWaiter struct {
	q       *waitQueue
	signal  chan struct{} // capacity 1: something changed, look again
	woken   bool          // it should ask: a release, a free slot, a new subscription
	asking  bool          // its ask is in flight
	recheck bool          // a release came while it asked
}

func (q *waitQueue) add() *holdWaiter {
	w := &holdWaiter{q: q, signal: make(chan struct{}, 1)}
	q.ws = append(q.ws, w)
	return w
}

func (w *holdWaiter) poke() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// enter queues a new waiter behind the key's waiters, if it has any: the key
// is full, and the new waiter needs no ask to know it, unless a slot freed
// meanwhile is kept for it (then it is woken). Otherwise it returns nil.
func (r *waitRoom) enter(name string) *holdWaiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if q := r.queues[name]; q != nil {
		w := q.add()
		if q.spare > 0 {
			q.spare--
			w.woken = true
		}
		return w
	}
	return nil
}

// join queues a new waiter after a denied ask that saw the earliest lease
// run out at until. If releases of the key are already heard, again says that
// it must ask once more (and it is then marked asking): a release between its
// ask and now was not heard by it. Otherwise the subscription, once made,
// wakes it.
func (r *waitRoom) join(name string, until time.Time) (w *holdWaiter, again bool) {
	r.mu.Lock()
	q := r.queues[name]
	made := q == nil
	if made {
		if r.queues == nil {
			r.queues = make(map[string]*waitQueue)
		}
		q = &waitQueue{name: name, ready: r.heard}
		r.queues[name] = q
	}
	q.until = until
	w = q.add()
	w.asking, again = q.ready, q.ready
	r.mu.Unlock()
	if made && r.watch != nil {
		r.watch(name)
	}
	return w, again
}

// wait blocks until w should ask (and marks it asking), or ctx ends.
func (r *waitRoom) wait(ctx context.Context, w *holdWaiter) error {
	for {
		r.mu.Lock()
		if w.woken {
			w.woken, w.asking = false, true
			r.mu.Unlock()
			return nil
		}
		head := w.q.ws[0] == w
		until := w.q.until
		r.mu.Unlock()

		var tc <-chan time.Time
		var t *time.Timer
		if head {
			t = time.NewTimer(time.Until(until))
			tc = t.C
		}
		select {
		case <-w.signal:
		case <-tc:
			r.mu.Lock()
			if !time.Now().Before(w.q.until) || w.woken { // else a later ask moved the expiry on
				w.woken, w.asking = false, true
				r.mu.Unlock()
				return nil
			}
			r.mu.Unlock()
		case <-ctx.Done():
			if t != nil {
				t.Stop()
			}
			return ctx.Err()
		}
		if t != nil {
			t.Stop()
		}
	}
}

// denied records w's denied ask, which saw the earliest lease run out at
// until, and reports whether w must ask again at once (marked asking): a
// release came while it asked. Otherwise the slots kept for the next waiter
// were freed before the ask (a slot is kept only while w would ask again),
// and the ask saw them taken: none is kept any longer.
func (r *waitRoom) denied(w *holdWaiter, until time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.asking = false
	w.q.until = until
	if w.recheck || w.woken {
		w.recheck, w.woken, w.asking = false, false, true
		return true
	}
	w.q.spare = 0
	return false
}

// granted removes w (nil for a Hold that never waited) from the key's queue
// after a grant, and wakes a waiter for each of the free slots that no
// release announced (a release wakes a waiter of its own).
func (r *waitRoom) granted(w *holdWaiter, name string, free int) {
	if w == nil && free <= 0 {
		return
	}
	r.mu.Lock()
	q := r.queues[name]
	if w != nil {
		q = w.q
		r.remove(w)
	}
	for ; q != nil && free > 0; free-- {
		r.wake(q)
	}
	r.mu.Unlock()
	if q != nil {
		r.tidy(q)
	}
}

// leave removes w from its queue without a grant: its ctx ended or the store
// failed. A wake it did not use goes to the next waiter, and so does an ask
// cut short, which may have been for a release.
func (r *waitRoom) leave(w *holdWaiter) {
	r.mu.Lock()
	q := w.q
	pass := w.woken || w.recheck || w.asking
	w.woken, w.recheck, w.asking = false, false, false
	r.remove(w)
	if pass {
		r.wake(q)
	}
	r.mu.Unlock()
	r.tidy(q)
}

// remove takes w out of its queue; the new head, if the head changed, looks
// at its timer. mu is held.
func (r *waitRoom) remove(w *holdWaiter) {
	q := w.q
	i := slices.Index(q.ws, w)
	if i < 0 {
		return
	}
	q.ws = slices.Delete(q.ws, i, i+1)
	if i == 0 && len(q.ws) > 0 {
		q.ws[0].poke()
	}
}

// tidy forgets queue q if it is empty, and tells watch.
func (r *waitRoom) tidy(q *waitQueue) {
	r.mu.Lock()
	gone := len(q.ws) == 0 && r.queues[q.name] == q
	if gone {
		delete(r.queues, q.name)
	}
	r.mu.Unlock()
	if gone && r.watch != nil {
		r.watch(q.name)
	}
}

// has reports whether any Hold waits for the key.
func (r *waitRoom) has(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queues[name] != nil
}

// wakeOne wakes the longest-waiting waiter of q that is neither asking nor
// woken already, and reports whether there was one. mu is held.
func (r *waitRoom) wakeOne(q *waitQueue) bool {
	for _, w := range q.ws {
		if !w.asking && !w.woken {
			w.woken = true
			w.poke()
			return true
		}
	}
	return false
}

// notify is a release of the key: see wake.
func (r *waitRoom) notify(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if q := r.queues[name]; q != nil {
		r.wake(q)
	}
}

// wake hands a freed slot to q's waiters: it wakes one, or if none is free
// to wake, makes an asking one ask again; if every waiter is already bound
// to ask again, the slot is kept for the next to enter. mu is held.
func (r *waitRoom) wake(q *waitQueue) {
	if r.wakeOne(q) {
		return
	}
	for _, w := range q.ws {
		if w.asking && !w.recheck {
			w.recheck = true
			return
		}
	}
	q.spare++
}

// ready says whether releases of the key are heard. Once they are, every
// waiter asks again: a release before then went unheard.
func (r *waitRoom) ready(name string, heard bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queues[name]
	if q == nil {
		return
	}
	q.ready = heard
	if heard {
		wakeAll(q)
	}
}

// deaf makes every queue unheard and wakes every waiter: the store stopped
// listening (RedisStore.Close).
func (r *waitRoom) deaf() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heard = false
	for _, q := range r.queues {
		q.ready = false
		wakeAll(q)
	}
}

func wakeAll(q *waitQueue) {
	for _, w := range q.ws {
		if w.asking {
			w.recheck = true
		} else if !w.woken {
			w.woken = true
			w.poke()
		}
	}
}
