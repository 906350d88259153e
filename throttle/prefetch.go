package throttle

import (
	"context"
	"sync"
	"time"
)

// Prefetch (WithPrefetch): a one-bucket call that goes to the store books,
// in the same script call, a few more grants of the same shape that the
// bucket can make at once (each with a longest wait of 0, decided after the
// call's own, so they only take what it left); the calls of that shape that
// follow in this process while they are fresh take them without a round
// trip. How many it books follows the demand: none unless the shape's last
// booking came back while fresh (calls sparser than that would lose what
// they booked), else twice as many as the calls that took from it, plus
// one, at most the option's n, and no more than would take the bucket below
// half of what it grants at once, as its last booking left it: a bucket
// nearer its limit than that is booked one call at a time, as without
// prefetch, so that no process holds grants others are about to need.
//
// How long a grant stays fresh is the bucket's: a 64th of the time its
// policy takes to give back all it grants at once (QuotaOf), at least
// minFresh and at most maxFresh.
//
// The promise holds on the bucket's books: every prefetched grant is a grant
// the bucket made at the instant it was booked. The caller that takes it
// acts up to the freshness F later, as a waiter that woke late would: over
// any span, the process can act on what the policy grants over that span
// and F more; for a token or leaky bucket, rate·F more grants: at most a
// 64th of its burst, or a millisecond's worth where that is more (at most
// one below 1,000 a second). Grants not taken while fresh are given back
// (lua/giveback.lua, one more script call: by a timer, off the callers'
// path, or by the shape's next call if it comes before the timer, ahead of
// its own booking): the latest first, each while it is still the bucket's
// latest booking; once another booking stands on them they stay spent. A
// bucket that has refilled what they took by then (its reset, as of their
// booking, has passed: a limit far above the demand) is not asked. The cost
// is fairness: while they wait here no other process can have them, and
// those another process booked after are lost to every process. A bucket
// that cannot grant at once books no extra: under contention prefetch does
// nothing.

// minFresh and maxFresh bound how long a prefetched grant may be taken
// after it was booked.
const (
	minFresh = time.Millisecond
	maxFresh = 20 * time.Millisecond
)

// freshness is how long a grant prefetched from b may be taken after it was
// booked: a 64th of the time b's policy takes to give back all it grants at
// once, from minFresh to maxFresh.
func freshness(b Bucket) time.Duration {
	_, refill := b.Limit.quota()
	return min(max(refill/64, minFresh), maxFresh)
}

// giveBackTimeout bounds a give-back's store call.
const giveBackTimeout = time.Second

// prefetcher is the prefetch layer (stack): it changes how a one-bucket
// reserve reaches the layers below, and passes every other call to them.
type prefetcher struct {
	seam            // the layers below
	b       batcher // the store, which takes back stale grants
	max     int
	fresh   func(Bucket) time.Duration // freshness; tests change it
	mu      sync.Mutex
	stashes map[shape]*stash
	sweepAt int // the map's size at which stale shapes are swept out
	given   int // grants given back so far (tests read it)
	expired int // timers that have run, give-back call included (tests wait for them)
}

// stash is one shape's prefetched grants.
type stash struct {
	req   request       // the shape's request, for a give-back
	fresh time.Duration // how long the last booking's grants may be taken
	room  int           // what the bucket could still grant at once after the last booking
	ds    []prefetched
	taken int       // grants taken since the last booking
	last  time.Time // when the last booking came back
}

type prefetched struct {
	d   decision
	got time.Time
}

func newPrefetcher(below seam, b batcher, n int) *prefetcher {
	return &prefetcher{seam: below, b: b, max: n, fresh: freshness, stashes: make(map[shape]*stash), sweepAt: 64}
}

// reserve is, for a one-bucket shape, a prefetched grant if a fresh one is
// stashed, else a store call that books req and the extras.
func (p *prefetcher) reserve(ctx context.Context, req request) (decision, request, error) {
	sh, ok := shapeOf(&req)
	if !ok || sh.k != 1 || req.share != nil {
		// A grant booked ahead for a caller of a Share would be booked
		// at its tenant's and level's place of now, not of its caller's.
		return p.seam.reserve(ctx, req)
	}
	want, fresh := 0, p.fresh(sh.one)
	var stale []decision // the latest booking's extras, gone stale
	var back request
	var last time.Time // when they were booked
	p.mu.Lock()
	if s := p.stashes[sh]; s != nil {
		for len(s.ds) > 0 {
			x := s.ds[0]
			s.ds = s.ds[1:]
			if time.Since(x.got) <= fresh {
				s.taken++
				p.mu.Unlock()
				return x.d, req, nil
			}
			if x.got.Equal(s.last) {
				stale = append(stale, x.d)
			}
		}
		if time.Since(s.last) <= fresh {
			most, _ := sh.one.Limit.quota()
			want = max(0, min(p.max, 2*s.taken+1, s.room-most/2))
		}
		s.taken, back, last = 0, s.req, s.last
	}
	p.mu.Unlock()
	if len(stale) > 0 && worthGiving(stale, last) {
		// Their timer has not run yet: give them back before this call's
		// booking, which would stand on them.
		p.giveBack(ctx, back, stale)
	}

	reqs := make([]request, 1+want)
	for i := range reqs {
		reqs[i] = req
		if i > 0 {
			reqs[i].maxWait = 0
		}
	}
	ds, err := p.seam.reserveBatch(ctx, reqs)
	if err != nil {
		return p.seam.standIn(ctx, req, err)
	}
	now := time.Now()
	p.mu.Lock()
	s := p.stashes[sh]
	if s == nil {
		s = &stash{}
		p.stashes[sh] = s
	}
	s.req, s.last, s.fresh, s.room = req, now, fresh, ds[0].remaining
	booked := false
	for _, d := range ds[1:] {
		if d.granted {
			s.ds = append(s.ds, prefetched{d: d, got: now})
			s.room, booked = d.remaining, true
		}
	}
	if len(p.stashes) >= p.sweepAt {
		p.sweep()
	}
	p.mu.Unlock()
	if booked {
		time.AfterFunc(fresh, func() { p.expire(sh, now) })
	}
	return ds[0], req, nil
}

// expire gives back what is left of the extras booked at got for shape sh,
// once they are stale, if that booking is still the shape's latest (an
// earlier one's extras have a later booking standing on them: they stay
// spent).
func (p *prefetcher) expire(sh shape, got time.Time) {
	defer func() {
		p.mu.Lock()
		p.expired++
		p.mu.Unlock()
	}()
	p.mu.Lock()
	s := p.stashes[sh]
	if s == nil {
		p.mu.Unlock()
		return
	}
	var stale []decision
	keep := s.ds[:0]
	for _, x := range s.ds {
		if x.got.Equal(got) {
			stale = append(stale, x.d)
		} else {
			keep = append(keep, x)
		}
	}
	s.ds = keep
	back, latest := s.req, s.last.Equal(got)
	p.mu.Unlock()
	if latest && len(stale) > 0 && worthGiving(stale, got) {
		ctx, cancel := context.WithTimeout(context.Background(), giveBackTimeout)
		defer cancel()
		p.giveBack(ctx, back, stale)
	}
}

// worthGiving reports whether stale extras booked at got may still count
// in their bucket: their last decision's reset (µs until the bucket could
// grant its most at once, as of the booking) has not passed. A bucket that
// has refilled what they took since (a limit far above the demand) has
// nothing to give back, and the call would cost a round trip for nothing.
func worthGiving(stale []decision, got time.Time) bool {
	return time.Since(got) < micros(stale[len(stale)-1].reset)
}

// giveBack gives ds, stale extras of req's shape from one booking, in
// booking order, back to the store (lua/giveback.lua). If it fails they
// stay spent, as they would without it.
func (p *prefetcher) giveBack(ctx context.Context, req request, ds []decision) {
	req.took(ds[0]) // an Adaptive bucket's extras, at the rate they were booked at (one call: one rate)
	n, err := p.b.giveBack(ctx, req, ds, newID())
	if err != nil {
		return // they stay spent
	}
	p.mu.Lock()
	p.given += n
	p.mu.Unlock()
}

// sweep drops the shapes whose last booking is no longer fresh and whose
// extras are gone (taken, or given back by their timer), then waits for the
// map to double before the next sweep, so a call pays O(1) for it on
// average. p.mu is held.
func (p *prefetcher) sweep() {
	for sh, s := range p.stashes {
		if time.Since(s.last) > s.fresh && len(s.ds) == 0 { // extras left wait for their timer
			delete(p.stashes, sh)
		}
	}
	p.sweepAt = max(64, 2*len(p.stashes))
}
