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

	mu      sync.Mutex
	buckets map[memKey]int64 // TAT in µs; an entry at or before now is a full bucket
	markers map[string]int64 // refund marker → expiry, µs
}

type memKey struct{ prefix, name string }

// NewMemoryStore returns an empty in-process store. WithClock sets its time source.
func NewMemoryStore(opts ...StoreOption) *MemoryStore {
	c := newStoreConfig(opts)
	return &MemoryStore{clock: c.clock, buckets: make(map[memKey]int64), markers: make(map[string]int64)}
}

func (m *MemoryStore) nowMicros() int64 {
	if m.clock != nil {
		return m.clock.Now().UnixMicro()
	}
	return time.Now().UnixMicro()
}

// Len reports how many buckets the store holds that are not full.
func (m *MemoryStore) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMicros()
	n := 0
	for _, tat := range m.buckets {
		if tat > now {
			n++
		}
	}
	return n
}

// tatOf is the bucket's TAT at now, never before now.
func (m *MemoryStore) tatOf(k memKey, now int64) int64 {
	if tat, ok := m.buckets[k]; ok && tat > now {
		return tat
	}
	return now
}

func (m *MemoryStore) put(k memKey, tat, now int64) {
	if _, ok := m.buckets[k]; !ok {
		m.sweep(now)
	}
	m.buckets[k] = tat
}

// sweep forgets up to two full buckets and expired markers: amortised cleanup.
func (m *MemoryStore) sweep(now int64) {
	i := 0
	for k, tat := range m.buckets {
		if tat <= now {
			delete(m.buckets, k)
		}
		if i++; i >= 2 {
			break
		}
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
	n := req.len()

	d := decision{now: now}
	if n > 1 {
		d.tats = make([]int64, n-1)
	}
	for i := 0; i < n; i++ {
		b := req.at(i)
		t := b.Limit.interval()
		tat := m.tatOf(memKey{req.prefix, b.Key}, now)
		nw := tat + int64(b.N)*t
		d.wait = max(d.wait, nw-now-int64(b.Limit.Burst)*t)
		d.setTat(i, tat)
	}
	if req.maxWait < 0 || d.wait <= req.maxWait {
		d.granted = true
		for i := 0; i < n; i++ {
			b := req.at(i)
			nw := d.tatAt(i) + int64(b.N)*b.Limit.interval()
			m.put(memKey{req.prefix, b.Key}, nw, now)
			d.setTat(i, nw)
		}
	}
	remaining := int64(maxBurst)
	for i := 0; i < n; i++ {
		b := req.at(i)
		t := b.Limit.interval()
		ahead := d.tatAt(i) - now
		d.reset = max(d.reset, ahead)
		remaining = min(remaining, floorDiv(int64(b.Limit.Burst)*t-ahead, t))
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
	for i := 0; i < req.len(); i++ {
		b := req.at(i)
		k := memKey{req.prefix, b.Key}
		tat, ok := m.buckets[k]
		mine := d.tatAt(i)
		if !ok || tat <= now || tat < mine {
			continue
		}
		back := int64(b.N)*b.Limit.interval() - (tat - mine)
		if back <= 0 {
			continue
		}
		if nt := tat - back; nt <= now {
			delete(m.buckets, k)
		} else {
			m.buckets[k] = nt
		}
	}
	return true, nil
}

// cooldown is cooldown.lua in Go; see that file for the contract.
func (m *MemoryStore) cooldown(_ context.Context, prefix string, b Bucket, d time.Duration) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMicros()
	k := memKey{prefix, b.Key}
	t, burst := b.Limit.interval(), int64(b.Limit.Burst)
	tat := m.tatOf(k, now)
	if target := now + int64(d/time.Microsecond) + (burst-1)*t; target > tat {
		tat = target
		m.put(k, tat, now)
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
