package throttle

// tatState is a token or leaky bucket's state in a MemoryStore, as
// lua/tat.lua keeps it: the TAT in µs, the time at which the bucket has
// caught up with everything booked.
type tatState struct{ tat int64 }

func (s *tatState) idleAt(now int64) bool { return s.tat <= now }

// tatModule is lua/tat.lua in Go: what token and leaky buckets share.
type tatModule struct {
	tat  int64     // never before now
	t    int64     // µs per token
	cool int64     // the cooldown's end, 0: none
	st   *tatState // the key's state, if it has one: save writes it in place
}

func openTAT(st memState, now, t, cool int64) tatModule {
	m := tatModule{tat: now, t: t, cool: cool}
	if s, ok := st.(*tatState); ok {
		m.st = s
		m.tat = max(s.tat, now)
	}
	return m
}

// commit books n at s; the handle is the TAT before, as in lua/tat.lua.
func (m *tatModule) commit(_, s int64, n int) int64 {
	before := m.tat
	m.tat = max(m.tat, s) + int64(n)*m.t
	return before
}

// after is the TAT a booking of n at slot left, from its handle.
func (m *tatModule) after(handle, slot int64, n int) int64 { return max(handle, slot) + int64(n)*m.t }

func (m *tatModule) isTail(handle, slot int64, n int) bool { return m.tat == m.after(handle, slot, n) }

func (m *tatModule) has(now, handle int64) bool { return m.tat > now && handle <= m.tat }

// rollbackTo gives back the latest booking and then each whole hole left at
// the tail, never moving the TAT before floor; self is the module that embeds m.
func (m *tatModule) rollbackTo(self module, handle, floor int64, hs *holes) {
	t := handle
	for t > floor {
		i := hs.index(func(h hole) bool { return h.n == h.n0 && m.after(h.handle, h.at, h.n0) == t })
		if i < 0 {
			break
		}
		t = hs.list[i].handle
		hs.drop(i, self)
	}
	m.tat = max(t, floor)
}

func (m *tatModule) release(int64, int, int64) {}

func (m *tatModule) holeTill(at int64) int64 { return at + 1 }

// flag: the TAT a Lua flag write puts back reads as this one.
func (m *tatModule) flag() {}

// save: the TAT, whether written or not, reads the same on the next call.
func (m *tatModule) save() (memState, bool) {
	if m.st == nil {
		return &tatState{tat: m.tat}, true
	}
	m.st.tat = m.tat
	return m.st, true
}

func (m *tatModule) next(at int64, _ int) int64 { return at }
