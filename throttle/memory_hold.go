package throttle

import (
	"context"
	"slices"
)

// memSems are a memory store's semaphores (Concurrency): hold.lua, renew.lua
// and release.lua in Go, on the store's clock, and the room where the
// store's blocked Holds wait, which a release wakes directly.
type memSems struct {
	leases  map[string]map[string]int64 // semKey → lease id → the lease's end, µs; guarded by memoryStore.mu
	flights map[string]*memFlight       // semKey → its automatic bound (flight_store.go); guarded by memoryStore.mu
	room    waitRoom
}

func newMemSems() *memSems {
	return &memSems{leases: make(map[string]map[string]int64), flights: make(map[string]*memFlight), room: waitRoom{heard: true}}
}

// live is the semaphore's leases at now, those that ran out removed (and the
// semaphore forgotten if none is left), and how many ran out. m.mu is held.
func (m *memoryStore) live(name string, now int64) (map[string]int64, int) {
	ls := m.sems.leases[name]
	n := len(ls)
	for id, end := range ls {
		if end <= now {
			delete(ls, id)
		}
	}
	expired := n - len(ls)
	if ls != nil && len(ls) == 0 {
		delete(m.sems.leases, name)
		return nil, expired
	}
	return ls, expired
}

// hold is hold.lua in Go; see that file for the contract.
func (m *memoryStore) hold(_ context.Context, prefix, key string, max int, lease int64, id string, auto int) (holdReply, error) {
	return m.holdNow(prefix, key, max, lease, id, auto), nil
}

// holdNow is hold, which on a memory store never fails.
func (m *memoryStore) holdNow(prefix, key string, max int, lease int64, id string, auto int) holdReply {
	name := semKey(prefix, key)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMicros()
	if auto > 0 {
		max = m.flightBound(name, max, auto, now)
	}
	ls, expired := m.live(name, now)
	_, mine := ls[id]
	if mine || len(ls) < max {
		if ls == nil {
			m.sweepSems(now)
			ls = make(map[string]int64)
			m.sems.leases[name] = ls
		}
		ls[id] = now + lease
		return holdReply{granted: true, held: len(ls), now: now, expired: expired, max: max}
	}
	ends := make([]int64, 0, len(ls))
	for _, end := range ls {
		ends = append(ends, end)
	}
	slices.Sort(ends)
	return holdReply{wait: ends[len(ls)-max] - now, held: len(ls), now: now, expired: expired, max: max}
}

// renew is renew.lua in Go; see that file for the contract.
func (m *memoryStore) renew(_ context.Context, prefix, key string, lease int64, id string) (bool, error) {
	name := semKey(prefix, key)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMicros()
	ls, _ := m.live(name, now)
	if _, ok := ls[id]; !ok {
		return false, nil
	}
	ls[id] = now + lease
	return true, nil
}

// release is release.lua in Go; see that file for the contract. The freed
// slot wakes the key's longest-waiting Hold.
func (m *memoryStore) release(_ context.Context, prefix, key, id string) (bool, error) {
	name := semKey(prefix, key)
	m.mu.Lock()
	ls, _ := m.live(name, m.nowMicros())
	_, ok := ls[id]
	if ok {
		delete(ls, id)
		if len(ls) == 0 {
			delete(m.sems.leases, name)
		}
	}
	m.mu.Unlock()
	if ok {
		m.sems.room.notify(name)
	}
	return ok, nil
}

func (m *memoryStore) waiters() *waitRoom { return &m.sems.room }

// sweepSems forgets up to two semaphores whose leases have all run out:
// amortised cleanup, as sweep does for buckets. m.mu is held.
func (m *memoryStore) sweepSems(now int64) {
	i := 0
	for name := range m.sems.leases {
		m.live(name, now)
		if i++; i >= 2 {
			break
		}
	}
}

var _ holdStore = (*memoryStore)(nil)
