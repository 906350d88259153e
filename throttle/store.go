package throttle

import (
	"context"
	"time"
)

// Store keeps bucket state for a Limiter. It is implemented by *RedisStore
// (shared by every process that uses the same Redis) and *MemoryStore (one
// process); both make the same decisions, held to one conformance table.
type Store interface {
	// reserve takes n tokens from every bucket of req, or from none (see reserve.lua).
	reserve(ctx context.Context, req request) (decision, error)
	// refund gives back what a reservation took and no later one stands on, at most once.
	refund(ctx context.Context, req request, d decision, id string) (bool, error)
	// cooldown grants nothing from the bucket for d, then resumes at its pace.
	cooldown(ctx context.Context, prefix string, b Bucket, d time.Duration) (time.Duration, error)
	// cooldownLeft is how much of the bucket's cooldown is left.
	cooldownLeft(ctx context.Context, prefix, key string) (time.Duration, error)
}

// Clock tells a store the time. Stores read it when given one through WithClock;
// a RedisStore otherwise uses Redis TIME, a MemoryStore time.Now.
type Clock interface {
	Now() time.Time
}

// StoreOption configures a store.
type StoreOption func(*storeConfig)

type storeConfig struct {
	clock Clock
}

// WithClock makes a store read time from c instead of its default. For a
// RedisStore this is for tests: it replaces Redis TIME, the fleet's one clock.
func WithClock(c Clock) StoreOption {
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
// bucket is held by value so a single-bucket call allocates nothing.
type request struct {
	prefix  string
	one     Bucket
	more    []Bucket
	pol     algo  // a policy other than Limit: one bucket, one.Limit unused
	maxWait int64 // µs; negative means no bound
}

func (r *request) len() int { return 1 + len(r.more) }

// prepare sets each bucket's interval; Limiter.check does it for real calls.
func (r *request) prepare() {
	if r.pol != nil {
		return
	}
	for i := 0; i < r.len(); i++ {
		b := r.at(i)
		b.t = b.Limit.interval()
	}
}

func (r *request) at(i int) *Bucket {
	if i == 0 {
		return &r.one
	}
	return &r.more[i-1]
}

// decision is a store's answer to reserve.
type decision struct {
	granted   bool
	wait      int64   // µs until the caller may act (granted), or RetryAfter (denied)
	remaining int     // fewest tokens left in any bucket
	reset     int64   // µs until every bucket is full
	now       int64   // the store's time of the decision, µs
	tat       int64   // first bucket's TAT after a grant (µs): the refund handle
	tats      []int64 // the other buckets' TATs
}

func (d *decision) tatAt(i int) int64 {
	if i == 0 {
		return d.tat
	}
	return d.tats[i-1]
}

func (d *decision) setTat(i int, tat int64) {
	if i == 0 {
		d.tat = tat
	} else {
		d.tats[i-1] = tat
	}
}

// slot is the store time at which a granted caller may act.
func (d *decision) slot() int64 { return d.now + d.wait }

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
