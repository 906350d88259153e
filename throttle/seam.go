package throttle

import (
	"context"
	"time"
)

// seam is the store as a Limiter calls it: every call that reaches the
// store goes through it. NewLimiter builds it once (stack), from the store
// out, and that is the one place that says which code serves a call.
//
// A layer is a seam over the seam below it; coalescing and prefetch embed
// the one below, and change only how reserve gets there.
type seam interface {
	// reserve is Store.reserve, and the request it answered: req, or,
	// from a layer that answers from elsewhere (FailLocal's local bucket),
	// the one it answered there, with the decision marked so that its
	// refund goes there too.
	reserve(ctx context.Context, req request) (decision, request, error)
	// reserveBatch decides reqs in one store call, one after the other. If
	// the store did not answer, standIn gives each request its answer.
	reserveBatch(ctx context.Context, reqs []request) ([]decision, error)
	// standIn is the failure policy's answer to req, one of a batch whose
	// store call failed with err, for the caller of ctx (as reserve's).
	standIn(ctx context.Context, req request, err error) (decision, request, error)
	// refund gives a cancelled reservation's turn back where it was made.
	refund(ctx context.Context, req request, d decision, id string) (bool, error)
	// charge settles one bucket of a reservation its real cost where the
	// reservation was made.
	charge(ctx context.Context, req request, d decision, used int, id string) (bool, error)
	cooldown(ctx context.Context, prefix string, b Bucket, d time.Duration) (time.Duration, error)
	cooldownLeft(ctx context.Context, prefix, key string) (time.Duration, error)
	peek(ctx context.Context, prefix string, b Bucket) (State, error)
	// reset voids the bucket's tickets, then forgets its state.
	reset(ctx context.Context, prefix string, b Bucket) error
	adapt(ctx context.Context, prefix, key string, o adaptOp) (AdaptState, error)
	shares(ctx context.Context, prefix, key string, most int) (shareView, error)
	issue(ctx context.Context, ts ticketStore, prefix, key, id string, slot, grace int64, note string) (int64, error)
	redeem(ctx context.Context, ts ticketStore, prefix, key, id string) (slot, now int64, note string, ok bool, err error)
	// hold takes a slot of h's semaphore (hold.go), waiting for one if wait.
	hold(ctx context.Context, h *holdCall, wait bool) (*Lease, error)
	// mode is Limiter.Mode.
	mode() string
}

// batcher is a store whose calls are round trips, worth sharing: coalescing
// and prefetch layer over it. giveBack returns prefetched grants that went
// stale (lua/giveback.lua).
type batcher interface {
	giveBack(ctx context.Context, req request, ds []decision, id string) (int, error)
}

// quickStore is a store that answers TryAcquire of a Limit without a
// request (memory_fast.go): ok false sends the call the general way.
type quickStore interface {
	tryLimit(prefix, key string, t pico, burst int64, n int) (d decision, ok bool)
}

// stack builds what l calls, from its store out:
//
//   - failure (failure.go), next to the store, serves every call: it
//     judges the store's answers and applies the failure policy,
//     FailClosed, FailOpen or FailLocal;
//   - coalescing (coalesce.go), over a store whose calls are round trips
//     (a batcher) unless WithoutCoalescing: a reserve of at most two
//     buckets without a Share shares its store call with those of its
//     shape;
//   - prefetch (prefetch.go), over such a store with WithPrefetch: a
//     reserve of one bucket without a Share may take a grant booked ahead;
//   - quick, TryAcquire of a Limit on a store that has a quick path
//     (a quickStore) and needs no layer but failure, under a policy that
//     never answers for it (not FailLocal): every other call goes through
//     the seam.
func stack(l *Limiter) (s seam, quick quickStore, err error) {
	g, err := newFailure(l.store, l.cfg, l.tel)
	if err != nil {
		return nil, nil, err
	}
	s = g
	b, remote := l.store.(batcher)
	if remote && !l.cfg.noCoalescing {
		s = newCoalescer(s, l)
	}
	if remote && l.cfg.prefetch > 0 {
		s = newPrefetcher(s, b, l.cfg.prefetch)
	}
	if q, ok := l.store.(quickStore); ok && !remote && l.cfg.failure != FailLocal {
		quick = q
	}
	return s, quick, nil
}
