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
// follow in this process within prefetchFresh take them without a round
// trip. How many it books follows the demand: none unless the shape's last
// booking came back within prefetchFresh (calls sparser than that would
// lose what they booked), else twice as many as the calls that took from
// it, plus one, at most the option's n.
//
// The promise holds on the bucket's books: every prefetched grant is a grant
// the bucket made at the instant it was booked. The caller that takes it
// acts up to prefetchFresh later, as a waiter that woke late would; in any
// span, that can put at most prefetchFresh/T more tokens than the policy's
// bound (at most one below 1,000 a second). The cost is fairness: grants
// booked and not taken within prefetchFresh are lost to every process (their
// instant has passed, so nothing can be given back), and while they wait
// here no other process can have them. A bucket that cannot grant at once
// books no extra: under contention prefetch does nothing.

// prefetchFresh is how long a prefetched grant may be taken after it was booked.
const prefetchFresh = time.Millisecond

type prefetcher struct {
	max     int
	fresh   time.Duration // prefetchFresh; tests change it
	mu      sync.Mutex
	stashes map[shape]*stash
	sweepAt int // the map's size at which stale shapes are swept out
}

// stash is one shape's prefetched grants.
type stash struct {
	ds    []prefetched
	taken int       // grants taken since the last booking
	last  time.Time // when the last booking came back
}

type prefetched struct {
	d   decision
	got time.Time
}

func newPrefetcher(n int) *prefetcher {
	return &prefetcher{max: n, fresh: prefetchFresh, stashes: make(map[shape]*stash), sweepAt: 64}
}

// decide is Limiter.decide for a one-bucket shape: a prefetched grant if a
// fresh one is stashed, else a store call that books req and the extras.
func (p *prefetcher) decide(ctx context.Context, l *Limiter, sh shape, req *request) (decision, *Limiter, error) {
	want := 0
	p.mu.Lock()
	if s := p.stashes[sh]; s != nil {
		for len(s.ds) > 0 {
			x := s.ds[0]
			s.ds = s.ds[1:]
			if time.Since(x.got) <= p.fresh {
				s.taken++
				p.mu.Unlock()
				return x.d, l, nil
			}
		}
		if time.Since(s.last) <= p.fresh {
			want = min(p.max, 2*s.taken+1)
		}
		s.taken = 0
	}
	p.mu.Unlock()

	reqs := make([]request, 1+want)
	for i := range reqs {
		reqs[i] = *req
		if i > 0 {
			reqs[i].maxWait = 0
		}
	}
	var ds []decision
	v, local, cause, err := l.storeCall(ctx, "reserve", func() (err error) {
		ds, err = l.store.reserveBatch(ctx, reqs)
		return err
	})
	switch {
	case local:
		return l.fb.decide(ctx, req, cause)
	case err != nil:
		return l.storeFailed(ctx, req, v, err)
	}
	now := time.Now()
	p.mu.Lock()
	s := p.stashes[sh]
	if s == nil {
		s = &stash{}
		p.stashes[sh] = s
	}
	s.last = now
	for _, d := range ds[1:] {
		if d.granted {
			s.ds = append(s.ds, prefetched{d: d, got: now})
		}
	}
	if len(p.stashes) >= p.sweepAt {
		p.sweep()
	}
	p.mu.Unlock()
	return ds[0], l, nil
}

// sweep drops the shapes whose last booking is older than p.fresh (their
// grants are all stale), then waits for the map to double before the next
// sweep, so a call pays O(1) for it on average. p.mu is held.
func (p *prefetcher) sweep() {
	for sh, s := range p.stashes {
		if time.Since(s.last) > p.fresh {
			delete(p.stashes, sh)
		}
	}
	p.sweepAt = max(64, 2*len(p.stashes))
}
