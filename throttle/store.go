package throttle

import (
	"context"
	"time"
)

// Store keeps bucket state for a Limiter. It is implemented by *RedisStore
// (shared by every process that uses the same Redis) and by NewMemoryStore's
// store (one process); both make the same decisions, held to one conformance table.
type Store interface {
	// reserve takes n from every bucket of req, or from none (see lua/reserve.lua).
	reserve(ctx context.Context, req request) (decision, error)
	// reserveBatch is reserve for calls of one shape (coalesce.go), decided
	// one after the other in one store call.
	reserveBatch(ctx context.Context, reqs []request) ([]decision, error)
	// refund gives a cancelled reservation's turn back, at most once (lua/refund.lua).
	refund(ctx context.Context, req request, d decision, id string) (bool, error)
	// charge settles req's one bucket, which decision d booked, what it
	// really used instead of what it took, at most once (lua/settle.lua).
	charge(ctx context.Context, req request, d decision, used int, id string) (bool, error)
	// cooldown grants nothing from the bucket for d, then resumes at its pace.
	cooldown(ctx context.Context, prefix string, b Bucket, d time.Duration) (time.Duration, error)
	// cooldownLeft is how much of the bucket's cooldown is left.
	cooldownLeft(ctx context.Context, prefix, key string) (time.Duration, error)
	// peek reads the bucket's state, taking nothing (lua/peek.lua).
	peek(ctx context.Context, prefix string, b Bucket) (State, error)
	// reset forgets the bucket's state, holes and cooldown.
	reset(ctx context.Context, prefix string, b Bucket) error
	// adapt reads or moves an adaptive bucket's effective rate (lua/adapt.lua).
	adapt(ctx context.Context, prefix, key string, o adaptOp) (AdaptState, error)
	// shares reads a shared bucket's tenants (lua/shares.lua).
	shares(ctx context.Context, prefix, key string, most int) (shareView, error)
	// configErr is why the store cannot be used, or nil (NewLimiter reports it).
	configErr() error
}

// clock tells a store the time. Stores read it when given one through WithClock;
// a RedisStore otherwise uses Redis TIME, a memory store time.Now.
type clock interface {
	Now() time.Time
}

// StoreOption configures a store.
type StoreOption func(*storeConfig)

type storeConfig struct {
	clock clock
}

// WithClock makes a store read time from c instead of its default. For a
// RedisStore this is for tests: it replaces Redis TIME, the fleet's one clock.
func WithClock(c clock) StoreOption {
	return func(s *storeConfig) { s.clock = c }
}

func newStoreConfig(opts []StoreOption) storeConfig {
	var c storeConfig
	for _, o := range opts {
		o(&c)
	}
	return c
}

// request is one reserve call: one or more buckets, all or nothing. The first
// bucket is held by value so a single-bucket call allocates nothing. Once
// checked (Limiter.check), every bucket's Limit is an algo value.
type request struct {
	prefix  string
	one     Bucket
	more    []Bucket
	maxWait int64  // µs; negative means no bound
	share   *share // the checked Share of one bucket, if any
	adapts  int    // how many of its buckets are Adaptive
}

func (r *request) len() int { return 1 + len(r.more) }

// took puts r's Adaptive buckets, as decision d took them, in their
// places: a refund of the call gives back what it took, at the rate it
// took it.
func (r *request) took(d decision) {
	if r.adapts == 0 || len(d.taken) == 0 {
		return
	}
	k := 0
	for i := 0; i < r.len() && k < len(d.taken); i++ {
		b := r.at(i)
		if a, ok := b.Limit.(Adaptive); ok {
			if f := d.taken[k]; f.burst > 0 {
				f.per = a.args()[2]
				b.Limit = f
			}
			k++
		}
	}
}

func (r *request) at(i int) *Bucket {
	if i == 0 {
		return &r.one
	}
	return &r.more[i-1]
}

// kind is the kind of every bucket of r, or mixed.
func (r *request) kind() kind {
	k := r.one.algo().kind()
	for i := range r.more {
		if r.more[i].algo().kind() != k {
			return mixed
		}
	}
	return k
}

// algo is b's policy as a checked request holds it.
func (b *Bucket) algo() algo { return b.Limit.(algo) }

// decision is a store's answer to reserve.
type decision struct {
	granted   bool
	overShare bool      // not granted: the tenant is over its share; wait is its come-back
	local     bool      // made by FailLocal's local bucket, not the store (fallback.go)
	wait      int64     // µs until the caller may act (granted), or RetryAfter (denied)
	remaining int       // fewest left in any bucket
	reset     int64     // µs until every bucket could grant its most at once
	now       int64     // the store's time of the decision, µs
	handle    pico      // the first bucket's handle after a grant: what a refund needs
	handles   []pico    // the other buckets'
	taken     []fixedTB // the Adaptive buckets as the call took them, in order
}

func (d *decision) handleAt(i int) pico {
	if i == 0 {
		return d.handle
	}
	return d.handles[i-1]
}

func (d *decision) setHandle(i int, h pico) {
	if i == 0 {
		d.handle = h
	} else {
		d.handles[i-1] = h
	}
}

// slot is the store time at which a granted caller may act.
func (d *decision) slot() int64 { return d.now + d.wait }

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
