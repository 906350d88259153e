package throttle

import (
	"context"
	"math"
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
	buckets map[memKey]float64 // TAT in µs; an entry at or before now is a full bucket
	markers map[string]int64   // refund marker → expiry, µs
}

type memKey struct{ prefix, name string }

// NewMemoryStore returns an empty in-process store. WithClock sets its time source.
func NewMemoryStore(opts ...StoreOption) *MemoryStore {
	c := newStoreConfig(opts)
	return &MemoryStore{clock: c.clock, buckets: make(map[memKey]float64), markers: make(map[string]int64)}
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
	now := float64(m.nowMicros())
	n := 0
	for _, tat := range m.buckets {
		if tat > now {
			n++
		}
	}
	return n
}

// tatOf is the bucket's TAT at now, never before now.
func (m *MemoryStore) tatOf(k memKey, now float64) float64 {
	if tat, ok := m.buckets[k]; ok && tat > now {
		return tat
	}
	return now
}

func (m *MemoryStore) put(k memKey, tat, now float64) {
	if _, ok := m.buckets[k]; !ok {
		m.sweep(now)
	}
	m.buckets[k] = tat
}

// sweep forgets up to two full buckets and expired markers: amortised cleanup.
func (m *MemoryStore) sweep(now float64) {
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
		if float64(exp) <= now {
			delete(m.markers, k)
		}
		if i++; i >= 2 {
			break
		}
	}
}

func (m *MemoryStore) reserve(_ context.Context, req request) (decision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	nowI := m.nowMicros()
	now := float64(nowI)
	n := req.len()

	var newOne float64
	var news []float64
	if n > 1 {
		news = make([]float64, n-1)
	}
	wait, reset, remaining := 0.0, 0.0, math.Inf(1)
	for i := 0; i < n; i++ {
		b := req.at(i)
		t, burst := b.Limit.interval(), float64(b.Limit.Burst)
		tat := m.tatOf(memKey{req.prefix, b.Key}, now)
		nw := tat + float64(b.N)*t
		if w := nw - now - burst*t; w > wait {
			wait = w
		}
		reset = math.Max(reset, tat-now)
		remaining = math.Min(remaining, burst-(tat-now)/t)
		if i == 0 {
			newOne = nw
		} else {
			news[i-1] = nw
		}
	}
	d := decision{now: nowI, wait: roundWait(wait)}
	if req.maxWait < 0 || d.wait <= req.maxWait {
		d.granted = true
		reset, remaining = 0, math.Inf(1)
		for i := 0; i < n; i++ {
			b := req.at(i)
			t, burst := b.Limit.interval(), float64(b.Limit.Burst)
			nw := newOne
			if i > 0 {
				nw = news[i-1]
			}
			m.put(memKey{req.prefix, b.Key}, nw, now)
			reset = math.Max(reset, nw-now)
			remaining = math.Min(remaining, burst-(nw-now)/t)
		}
		d.tat, d.tats = newOne, news
	}
	d.reset = int64(math.Ceil(reset))
	d.remaining = floorTokens(remaining)
	return d, nil
}

func (m *MemoryStore) refund(_ context.Context, req request, d decision, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	nowI := m.nowMicros()
	now := float64(nowI)
	slot := d.slot()
	if nowI >= slot {
		return false, nil
	}
	marker := req.prefix + req.one.Key + ":refund:" + id
	if exp, ok := m.markers[marker]; ok && exp > nowI {
		return false, nil
	}
	m.markers[marker] = slot + 1_000_000
	for i := 0; i < req.len(); i++ {
		b := req.at(i)
		k := memKey{req.prefix, b.Key}
		tat, ok := m.buckets[k]
		mine := d.tatAt(i)
		if !ok || tat < mine-1 {
			continue
		}
		back := float64(b.N)*b.Limit.interval() - math.Max(0, tat-mine)
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

func (m *MemoryStore) cooldown(_ context.Context, prefix string, b Bucket, d time.Duration) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := float64(m.nowMicros())
	k := memKey{prefix, b.Key}
	t, burst := b.Limit.interval(), float64(b.Limit.Burst)
	tat := m.tatOf(k, now)
	if target := now + float64(d/time.Microsecond) + (burst-1)*t; target > tat {
		tat = target
		m.put(k, tat, now)
	}
	return micros(int64(math.Ceil(math.Max(0, tat-now-(burst-1)*t)))), nil
}

// roundWait turns a float wait in µs into whole µs; up to 1 µs is float noise
// from the TAT arithmetic, never a whole token, and counts as no wait.
func roundWait(w float64) int64 {
	if w <= 1 {
		return 0
	}
	return int64(math.Ceil(w))
}

func floorTokens(x float64) int {
	x = math.Floor(x + 1e-9)
	if x < 0 || math.IsInf(x, 0) {
		return 0
	}
	return int(x)
}
