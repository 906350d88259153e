package throttle

import (
	"context"
	"sync"
	"time"
)

// MemoryStore keeps buckets in this process. It makes the same decisions as a
// RedisStore, so it suits tests, single-process programs, and fallbacks. Its
// zero value is not usable; call NewMemoryStore. It is safe for concurrent use.
//
// Full buckets are forgotten: a few entries are checked for that whenever a new
// bucket is added, so memory follows the number of buckets in use.
type MemoryStore struct {
	clock Clock
	start time.Time // without a Clock: time is start plus the monotonic time since

	mu        sync.Mutex
	buckets   map[memKey]*int64   // TAT in µs; an entry at or before now is a full bucket
	markers   map[string]int64    // refund marker → expiry, µs
	cooldowns map[memKey]int64    // a cooldown's end, µs
	states    map[memKey]memState // the state of keys under policies other than Limit (memory_algo.go)
	sems      *memSems            // semaphores of Concurrency and their waiting Holds (memory_hold.go)
}

// memKey names a key's state: a bucket's, or with kind set, a policy's (as
// "<name>:<kind>" does in Redis, without building that string).
type memKey struct{ prefix, name, kind string }

// NewMemoryStore returns an empty in-process store. WithClock sets its time source.
func NewMemoryStore(opts ...StoreOption) *MemoryStore {
	c := newStoreConfig(opts)
	return &MemoryStore{clock: c.clock, start: time.Now(), buckets: make(map[memKey]*int64), markers: make(map[string]int64), cooldowns: make(map[memKey]int64), states: make(map[memKey]memState), sems: newMemSems()}
}

// nowMicros reads the Clock, or else the monotonic clock only (one clock read,
// where time.Now takes two, and immune to wall-clock steps).
func (m *MemoryStore) nowMicros() int64 {
	if m.clock != nil {
		return m.clock.Now().UnixMicro()
	}
	return m.start.UnixMicro() + int64(time.Since(m.start)/time.Microsecond)
}

// tatOf is the bucket's TAT at now, never before now.
func (m *MemoryStore) tatOf(k memKey, now int64) int64 {
	if p := m.buckets[k]; p != nil && *p > now {
		return *p
	}
	return now
}

// slot is where bucket k's TAT lives, made if the bucket is new; added says
// so, and the caller then sweeps once it holds no pointer into the map (a
// sweep may drop a full bucket whose pointer it still holds).
func (m *MemoryStore) slot(k memKey) (p *int64, added bool) {
	if p = m.buckets[k]; p == nil {
		p = new(int64)
		m.buckets[k] = p
		added = true
	}
	return p, added
}

// sweep forgets up to two full buckets and expired markers: amortised cleanup.
func (m *MemoryStore) sweep(now int64) {
	i := 0
	for k, tat := range m.buckets {
		if *tat <= now {
			delete(m.buckets, k)
		}
		if i++; i >= 2 {
			break
		}
	}
	i = 0
	for k, st := range m.states {
		if st.idleAt(now) {
			delete(m.states, k)
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

// reserve is reserve.lua in Go; see that file for the contract.
func (m *MemoryStore) reserve(_ context.Context, req request) (decision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMicros()
	if req.pol != nil {
		return m.reserveAlgo(req, now), nil
	}
	n := req.len()

	d := decision{now: now}
	var p0 *int64   // the first bucket's TAT, looked up once
	var ps []*int64 // the others'
	if n > 1 {
		d.tats = make([]int64, n-1)
		ps = make([]*int64, n-1)
	}
	for i := 0; i < n; i++ {
		b := req.at(i)
		p := m.buckets[memKey{prefix: req.prefix, name: b.Key}]
		tat := now
		if p != nil && *p > now {
			tat = *p
		}
		if i == 0 {
			p0 = p
		} else {
			ps[i-1] = p
		}
		d.wait = max(d.wait, tat+int64(b.N)*b.t-now-int64(b.Limit.Burst)*b.t)
		d.setTat(i, tat)
	}
	if req.maxWait < 0 || d.wait <= req.maxWait {
		d.granted = true
		added := false
		for i := 0; i < n; i++ {
			b := req.at(i)
			p := p0
			if i > 0 {
				p = ps[i-1]
			}
			if p == nil {
				var a bool
				p, a = m.slot(memKey{prefix: req.prefix, name: b.Key})
				added = added || a
			}
			*p = d.tatAt(i) + int64(b.N)*b.t
			d.setTat(i, *p)
		}
		if added {
			m.sweep(now) // after the writes: new TATs are after now, so they stay
		}
	}
	remaining := int64(maxBurst)
	for i := 0; i < n; i++ {
		b := req.at(i)
		ahead := d.tatAt(i) - now
		d.reset = max(d.reset, ahead)
		remaining = min(remaining, floorDiv(int64(b.Limit.Burst)*b.t-ahead, b.t))
	}
	d.remaining = int(max(remaining, 0))
	if !d.granted {
		d.tat, d.tats = 0, nil
	}
	return d, nil
}

// refund is refund.lua in Go; see that file for the contract.
func (m *MemoryStore) refund(_ context.Context, req request, d decision, id string) (bool, error) {
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
	if req.pol != nil {
		m.refundAlgo(req, d, now)
		return true, nil
	}
	for i := 0; i < req.len(); i++ {
		b := req.at(i)
		k := memKey{prefix: req.prefix, name: b.Key}
		p := m.buckets[k]
		mine := d.tatAt(i)
		if p == nil || *p <= now || *p < mine {
			continue
		}
		back := min(int64(b.N)*b.t-(*p-mine), mine-now)
		if back <= 0 {
			continue
		}
		if nt := *p - back; nt <= now {
			delete(m.buckets, k)
		} else {
			*p = nt
		}
	}
	return true, nil
}

// cooldown is cooldown.lua in Go; see that file for the contract.
func (m *MemoryStore) cooldown(_ context.Context, prefix string, b Bucket, d time.Duration) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMicros()
	k := memKey{prefix: prefix, name: b.Key}
	t, burst := b.Limit.interval(), int64(b.Limit.Burst)
	tat := m.tatOf(k, now)
	if target := now + int64(d/time.Microsecond) + (burst-1)*t; target > tat {
		tat = target
		p, added := m.slot(k)
		*p = tat
		if added {
			m.sweep(now)
		}
	}
	if ends := now + int64(d/time.Microsecond); ends > m.cooldowns[k] {
		m.cooldowns[k] = ends
	}
	return micros(max(0, tat-now-(burst-1)*t)), nil
}

// floorDiv is a/b rounded towards minus infinity, as Lua's math.floor(a/b).
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// cooldownLeft is cooldown_left.lua in Go; see that file for the contract.
func (m *MemoryStore) cooldownLeft(_ context.Context, prefix, key string) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return micros(max(0, m.cooldowns[memKey{prefix: prefix, name: key}]-m.nowMicros())), nil
}
