package throttle

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// memoryStore is the Store NewMemoryStore returns.
//
// Full buckets are forgotten: a few entries are checked for that whenever a new
// bucket is added, so memory follows the number of buckets in use.
type memoryStore struct {
	clock  clock
	start  time.Time // without a Clock: time is start plus the monotonic time since
	seed   maphash.Seed
	shards [memShards]memShard // the buckets, by their names' hash tags

	mu   sync.Mutex // guards sems
	sems *memSems   // semaphores of Concurrency and their waiting Holds (memory_hold.go)
}

// memShards is how many locks a memory store's buckets are spread over: calls
// on buckets of different shards never wait for each other.
const memShards = 32

// memShard is a share of a memory store's buckets, under a lock of its own.
// A bucket's shard is that of its name's hash tag (or of its name, without
// one), so the buckets of one call, which share a tag (checkSlot), share a
// shard, and one lock covers the call.
type memShard struct {
	st *memoryStore

	mu        sync.Mutex
	entries   map[memKey]*memEntry // a key's state and holes, under its policy's kind
	markers   map[string]int64     // refund marker → expiry, µs
	cooldowns map[memKey]int64     // a cooldown's end by bucket name (kind unset), µs
	adapts    map[memKey]*memAdapt // adaptive buckets' effective rates (kind unset)
	shared    memShares            // shared buckets' tenants (share_memory.go)
	tickets   map[memKey]memTicket // tickets by bucket and id (ticket.go); made on first use
	voids     map[memKey]int64     // when each bucket's tickets were last voided, µs (ticket.go)

	_ [64]byte // shards apart in memory: no false sharing between their locks
}

// shard is the shard of bucket name.
func (m *memoryStore) shard(name string) *memShard {
	if t := hashTag(name); t != "" {
		name = t
	}
	return &m.shards[maphash.String(m.seed, name)%memShards]
}

func (m *memShard) nowMicros() int64 { return m.st.nowMicros() }

// memKey names a key's state: a bucket name under a prefix, and its policy's
// kind (as "<name>:<kind>" does in Redis, without building that string).
type memKey struct {
	prefix, name string
	kind         kind
}

// memEntry is one key's state and holes.
type memEntry struct {
	st memState // nil: none
	hs holes
}

// idleAt reports that the entry holds nothing that matters at now or later.
func (e *memEntry) idleAt(now int64) bool {
	if e.st != nil && !e.st.idleAt(now) {
		return false
	}
	for _, h := range e.hs.list {
		if h.till > now {
			return false
		}
	}
	return true
}

// NewMemoryStore returns an empty store that keeps buckets in this process.
// It makes the same decisions as a RedisStore, so it suits tests,
// single-process programs, and fallbacks; it holds Concurrency slots and
// tickets too. WithClock sets its time source. It is safe for concurrent
// use. Full buckets are forgotten, so its memory follows the number of
// buckets in use.
func NewMemoryStore(opts ...StoreOption) Store { return newMemoryStore(opts...) }

// newMemoryStore is NewMemoryStore as its concrete type.
func newMemoryStore(opts ...StoreOption) *memoryStore {
	c := newStoreConfig(opts)
	m := &memoryStore{clock: c.clock, start: time.Now(), seed: maphash.MakeSeed(), sems: newMemSems()}
	for i := range m.shards {
		m.shards[i] = memShard{st: m, entries: make(map[memKey]*memEntry), markers: make(map[string]int64),
			cooldowns: make(map[memKey]int64), adapts: make(map[memKey]*memAdapt), shared: memShares{}}
	}
	return m
}

// The Store methods go to the shard of the call's buckets.

func (m *memoryStore) reserve(ctx context.Context, req request) (decision, error) {
	return m.shard(req.one.Key).reserve(ctx, req)
}

func (m *memoryStore) reserveBatch(ctx context.Context, reqs []request) ([]decision, error) {
	return m.shard(reqs[0].one.Key).reserveBatch(ctx, reqs)
}

func (m *memoryStore) decide(req request) decision { return m.shard(req.one.Key).decide(req) }

func (m *memoryStore) refund(ctx context.Context, req request, d decision, id string) (bool, error) {
	return m.shard(req.one.Key).refund(ctx, req, d, id)
}

func (m *memoryStore) charge(ctx context.Context, req request, d decision, used int, id string) (bool, error) {
	return m.shard(req.one.Key).charge(ctx, req, d, used, id)
}

func (m *memoryStore) cooldown(ctx context.Context, prefix string, b Bucket, d time.Duration) (time.Duration, error) {
	return m.shard(b.Key).cooldown(ctx, prefix, b, d)
}

func (m *memoryStore) cooldownLeft(ctx context.Context, prefix, key string) (time.Duration, error) {
	return m.shard(key).cooldownLeft(ctx, prefix, key)
}

func (m *memoryStore) peek(ctx context.Context, prefix string, b Bucket) (State, error) {
	return m.shard(b.Key).peek(ctx, prefix, b)
}

func (m *memoryStore) reset(ctx context.Context, prefix string, b Bucket) error {
	return m.shard(b.Key).reset(ctx, prefix, b)
}

func (m *memoryStore) adapt(ctx context.Context, prefix, key string, o adaptOp) (AdaptState, error) {
	return m.shard(key).adapt(ctx, prefix, key, o)
}

func (m *memoryStore) shares(ctx context.Context, prefix, key string, most int) (shareView, error) {
	return m.shard(key).shares(ctx, prefix, key, most)
}

func (m *memoryStore) configErr() error { return nil }

// nowMicros reads the clock, or else the monotonic clock only (one clock read,
// where time.Now takes two, and immune to wall-clock steps).
func (m *memoryStore) nowMicros() int64 {
	if m.clock != nil {
		return m.clock.Now().UnixMicro()
	}
	return m.start.UnixMicro() + int64(time.Since(m.start)/time.Microsecond)
}

// sweep forgets up to two idle entries, one ended cooldown and two expired
// markers: amortised cleanup, run when an entry is added.
func (m *memShard) sweep(now int64) {
	i := 0
	for k, e := range m.entries {
		if e.idleAt(now) {
			delete(m.entries, k)
		}
		if i++; i >= 2 {
			break
		}
	}
	for k, ends := range m.cooldowns {
		if ends <= now {
			delete(m.cooldowns, k)
		}
		break
	}
	for k, ms := range m.shared {
		if ms.till <= now {
			delete(m.shared, k)
		}
		break
	}
	i = 0
	for k, exp := range m.markers {
		if exp <= now {
			delete(m.markers, k)
		}
		if i++; i >= 2 {
			break
		}
	}
}

// memCall is one bucket of a call: its key, entry and module.
type memCall struct {
	key    memKey
	e      *memEntry // nil: none yet
	hs     holes
	m      module
	n      int
	e0     int64 // the tail's earliest time
	ok     bool  // the tail can queue n
	retry  int64 // if not: its RetryAfter
	handle pico
	taken  fixedTB // an Adaptive bucket at its effective rate (burst 0: not one)
}

// open starts bucket b's part of a call at now, as the Lua modules' load and
// holes.lua's H.load do: it binds the key's state to the policy and releases
// the holes whose span is over.
func (m *memShard) open(prefix string, b *Bucket, now int64) memCall {
	a := b.algo()
	c := memCall{key: memKey{prefix: prefix, name: b.Key, kind: a.kind()}, n: b.N}
	if ad, ok := a.(Adaptive); ok { // lua/int.lua's atrate
		c.taken = ad.at(m.effective(prefix, b.Key, now))
		a = c.taken
	}
	var st memState
	if c.e = m.entries[c.key]; c.e != nil {
		st, c.hs = c.e.st, c.e.hs
	}
	c.m = a.open(st, now, m.cooldownAt(prefix, b.Key, now))
	c.hs.expire(now, c.m)
	return c
}

// cooldownAt is the end of the cooldown on bucket name, if it is after now; else 0.
func (m *memShard) cooldownAt(prefix, name string, now int64) int64 {
	if ends := m.cooldowns[memKey{prefix: prefix, name: name}]; ends > now {
		return ends
	}
	return 0
}

// close ends c's part of a call: the key keeps the state the call wrote, or
// the one it had, and its holes; an entry with nothing that matters goes.
func (m *memShard) close(c *memCall, now int64) {
	st, wrote := c.m.save()
	if !wrote && c.e != nil {
		st = c.e.st
	}
	e := memEntry{st: st, hs: c.hs}
	switch {
	case e.idleAt(now):
		delete(m.entries, c.key)
	case c.e != nil:
		*c.e = e
		m.entries[c.key] = c.e // an earlier bucket's sweep may have dropped it
	default:
		ne := new(memEntry)
		*ne = e
		m.entries[c.key] = ne
		m.sweep(now)
		m.entries[c.key] = ne // a sweep may have dropped it
	}
}

// reserve is lua/reserve.lua in Go; see that file for the contract.
func (m *memShard) reserve(_ context.Context, req request) (decision, error) {
	return m.decide(req), nil
}

// reserveBatch decides reqs one after the other, as lua/reserve_batch.lua.
func (m *memShard) reserveBatch(_ context.Context, reqs []request) ([]decision, error) {
	ds := make([]decision, len(reqs))
	for i := range reqs {
		ds[i] = m.decide(reqs[i])
	}
	return ds, nil
}

// decide is reserve, which on a memory store never fails.
func (m *memShard) decide(req request) decision {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMicros()
	k := req.len()
	var buf [2]memCall
	cs := buf[:0]
	for i := 0; i < k; i++ {
		c := m.open(req.prefix, req.at(i), now)
		c.e0, c.ok, c.retry = c.m.tail(now, c.n, req.maxWait)
		cs = append(cs, c)
	}
	var sc *shareCall
	if req.share != nil {
		sc = m.shared.load(req.prefix, req.share, now, max(now, m.cooldownAt(req.prefix, req.share.bucket, now)))
		sc.rate(cs[req.share.at-1].taken)
		if wait, over := sc.over(now); over {
			d := decision{now: now, wait: wait, overShare: true}
			for i := range cs {
				m.close(&cs[i], now)
				if cs[i].taken.burst > 0 {
					d.taken = append(d.taken, cs[i].taken)
				}
			}
			return d
		}
	}

	s, refused, isRefused := now, int64(0), false
	for moved := true; moved && !isRefused; {
		moved = false
		for i := range cs {
			c := &cs[i]
			x, hi := c.hs.best(s, c.n)
			if c.ok {
				if t := max(c.e0, s); hi < 0 || t < x {
					x, hi = t, 0
				}
			}
			switch {
			case hi < 0:
				if !isRefused || c.retry > refused {
					refused = c.retry
				}
				isRefused = true
			case x > s:
				s, moved = x, true
			}
		}
	}

	d := decision{now: now, wait: s - now}
	for i := range cs {
		if cs[i].taken.burst > 0 {
			d.taken = append(d.taken, cs[i].taken)
		}
	}
	if k > 1 {
		d.handles = make([]pico, k-1)
	}
	switch {
	case isRefused:
		d.wait = refused
	case req.maxWait < 0 || d.wait <= req.maxWait:
		d.granted = true
		for i := range cs {
			c := &cs[i]
			if x, hi := c.hs.best(s, c.n); hi >= 0 && x == s {
				c.handle = c.hs.take(hi, c.n, c.m)
			} else {
				c.handle = c.m.commit(now, s, c.n)
				if s > c.e0 && c.key.kind == kindTB { // lua/tb.lua's pushed
					c.hs.near = max(c.hs.near, s)
				}
			}
			d.setHandle(i, c.handle)
		}
		if sc != nil {
			sc.commit()
		}
	}
	d.remaining = maxBurst
	for i := range cs {
		r, z := cs[i].m.figures(now)
		d.remaining, d.reset = min(d.remaining, r), max(d.reset, z)
		m.close(&cs[i], now)
	}
	if !d.granted {
		d.handles = nil
	}
	return d
}

// refund is lua/refund.lua in Go; see that file for the contract.
func (m *memShard) refund(_ context.Context, req request, d decision, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMicros()
	slot := d.slot()
	if now >= slot {
		return false, nil
	}
	marker := req.prefix + req.one.Key + ":refund:" + id
	if exp, ok := m.markers[marker]; ok && exp > now {
		return false, nil
	}
	m.markers[marker] = slot + 1_000_000
	for i := 0; i < req.len(); i++ {
		c := m.open(req.prefix, req.at(i), now)
		switch h := d.handleAt(i); {
		case h != (pico{}) && c.m.isTail(h, slot, c.n):
			c.m.rollback(now, c.n, h, &c.hs)
		case c.m.has(now, h):
			c.hs.add(now, c.m, c.n, slot, h)
		}
		m.close(&c, now)
	}
	return true, nil
}

// charge is lua/settle.lua in Go; see that file for the contract.
func (m *memShard) charge(_ context.Context, req request, d decision, used int, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMicros()
	slot := d.slot()
	marker := req.prefix + req.one.Key + ":settle:" + id
	if exp, ok := m.markers[marker]; ok && exp > now {
		return false, nil
	}
	m.markers[marker] = max(slot, now) + 1_000_000
	c := m.open(req.prefix, &req.one, now)
	tb, isTB := c.m.(*tbModule)
	var before pico
	holes := len(c.hs.list) > 0
	if isTB {
		before = tb.tat
	}
	if used != c.n {
		c.m.settle(now, c.n, used, d.handle, slot, &c.hs)
	}
	if isTB && req.one.UpstreamSettle && used < c.n && !holes && len(c.hs.list) == 0 {
		tb.refund(now, c.n-used, before)
	}
	m.close(&c, now)
	return true, nil
}

// cooldown is lua/cooldown.lua in Go; see that file for the contract.
func (m *memShard) cooldown(_ context.Context, prefix string, b Bucket, d time.Duration) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMicros()
	b.N = 1
	c := m.open(prefix, &b, now)
	c.hs.clear(now, c.m)
	till := now + int64(d/time.Microsecond)
	c.m.hold(now, till)
	if k := (memKey{prefix: prefix, name: b.Key}); till > m.cooldowns[k] {
		m.cooldowns[k] = till
	}
	e, ok, retry := c.m.tail(now, 1, -1)
	m.close(&c, now)
	next := retry
	if ok {
		next = e - now
	}
	// A full leaky bucket's RetryAfter is when a request fits, not when it goes.
	return micros(max(next, till-now)), nil
}

// cooldownLeft is cooldown_left.lua in Go; see that file for the contract.
func (m *memShard) cooldownLeft(_ context.Context, prefix, key string) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return micros(max(0, m.cooldowns[memKey{prefix: prefix, name: key}]-m.nowMicros())), nil
}

// peek is lua/peek.lua in Go; it changes nothing.
func (m *memShard) peek(_ context.Context, prefix string, b Bucket) (State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMicros()
	a := b.algo()
	key := memKey{prefix: prefix, name: b.Key, kind: a.kind()}
	var st memState
	var hs holes
	if e := m.entries[key]; e != nil {
		st = e.st
		for _, h := range e.hs.list {
			if h.till > now {
				hs.list = append(hs.list, h)
			}
		}
	}
	cool := m.cooldownAt(prefix, b.Key, now)
	if ad, ok := a.(Adaptive); ok { // lua/int.lua's atrate
		a = ad.at(m.effective(prefix, b.Key, now))
	}
	mod := a.open(st, now, cool)
	e, ok, retry := mod.tail(now, b.N, -1)
	next := retry
	if ok {
		next = e - now
	}
	if x, hi := hs.best(now, b.N); hi >= 0 && (!ok || x-now < next) {
		next = x - now
	}
	r, z := mod.figures(now)
	left := max(0, cool-now)
	view := State{Remaining: r, NextFree: micros(max(next, left)), ResetAfter: micros(z), Cooldown: micros(left)}
	return withQuota(view, a, now), nil
}

// reset forgets the key's state, holes and cooldown, as a DEL of its keys.
func (m *memShard) reset(_ context.Context, prefix string, b Bucket) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, memKey{prefix: prefix, name: b.Key, kind: b.algo().kind()})
	delete(m.cooldowns, memKey{prefix: prefix, name: b.Key})
	return nil
}

// floorDiv is a/b rounded towards minus infinity, as Lua's math.floor(a/b).
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
