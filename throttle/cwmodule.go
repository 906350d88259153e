package throttle

// cwState is a calendar FixedWindow key's state, the hash of lua/cw.lua: the
// cursor (the start and end of the latest window anything is booked in, end
// 0 for a window not yet known, and its count) and a cooldown's end.
type cwState struct {
	w, e int64 // the cursor's window, µs; e = 0: not yet known, named by its first slot
	c    int64 // what is booked in it
	till int64 // when the state says nothing any more (the key's TTL)
	hold int64 // a cooldown's end, µs; 0: none
}

func (s *cwState) idleAt(now int64) bool { return now >= max(s.till, s.hold) }

// openCW is lua/cw.lua's load: b0, b1, b2 are the bounds of the window of
// now, the next one and the one after (the memory store's clock is the
// store's, so now is always in the first).
func (p FixedWindow) openCW(st memState, now, _ int64) module {
	b := p.bounds(now)
	m := &cwModule{max: int64(p.Max), b: b, fresh: true}
	m.s = cwState{w: b[0], e: b[1]}
	if s, ok := st.(*cwState); ok {
		m.prev = s
		m.s.hold = s.hold
		w, e := s.w, s.e
		if e == 0 && w >= b[0] {
			if w < b[1] {
				w, e = b[0], b[1]
			} else if w < b[2] {
				w, e = b[1], b[2]
			}
		}
		if (w == b[0] && e == b[1]) || (w == b[1] && e == b[2]) || (e == 0 && w >= b[2]) {
			m.fresh = false
			m.s.w, m.s.e, m.s.c = w, e, s.c
		}
	}
	return m
}

// cwModule is lua/cw.lua in Go.
type cwModule struct {
	max   int64
	b     [3]int64 // the starts of the window of now, the next, the one after
	s     cwState
	fresh bool // no state under these windows
	kept  bool // the call wrote the state
	prev  *cwState
}

func (m *cwModule) tail(now int64, n int, _ int64) (int64, bool, int64) {
	e := m.s.w
	if m.s.c+int64(n) > m.max {
		if m.s.w != m.b[0] {
			r := m.s.e
			if r == 0 {
				r = m.s.w
			}
			return 0, false, r - now
		}
		e = m.b[1]
	}
	return max(e, now, m.s.hold), true, 0
}

// win is the window of t at or after the cursor's start (cw.lua's cwwin).
func (m *cwModule) win(t int64) (int64, int64) {
	switch {
	case t < m.s.w || m.s.e == 0 || t < m.s.e:
		return m.s.w, m.s.e
	case t < m.b[1]:
		return m.b[0], m.b[1]
	case t < m.b[2]:
		return m.b[1], m.b[2]
	}
	return t, 0
}

// put marks the state written (cw.lua's cwput).
func (m *cwModule) put() { m.kept, m.fresh = true, false }

func (m *cwModule) commit(now, s int64, n int) pico {
	if ws, we := m.win(s); ws == m.s.w {
		m.s.c += int64(n)
	} else {
		m.s.w, m.s.e, m.s.c = ws, we, int64(n)
	}
	m.put()
	return whole(m.s.w)
}

func (m *cwModule) figures(now int64) (int, int64) {
	left := 0
	if m.s.w == m.b[0] && m.s.c < m.max {
		left = int(m.max - m.s.c)
	}
	reset := m.s.w
	if m.s.c > 0 && m.s.e != 0 {
		reset = m.s.e
	}
	return left, max(0, reset-now, m.s.hold-now)
}

func (m *cwModule) isTail(handle pico, _ int64, _ int) bool { return m.s.w == handle.us }

func (m *cwModule) has(_ int64, handle pico) bool { return !m.fresh && handle.us <= m.s.w }

func (m *cwModule) rollback(now int64, n int, _ pico, _ *holes) {
	m.s.c = max(0, m.s.c-int64(n))
	m.put()
}

func (m *cwModule) release(int64, int, pico) {}

func (m *cwModule) settle(now int64, n, used int, _ pico, slot int64, _ *holes) {
	if used < n {
		if m.fresh || slot < m.s.w || (m.s.e != 0 && slot >= m.s.e) {
			return
		}
		m.s.c = max(0, m.s.c-int64(n-used))
	} else {
		m.s.c += int64(used - n)
		if m.s.c > m.max && m.s.w == m.b[0] {
			m.s.w, m.s.e, m.s.c = m.b[1], m.b[2], m.s.c-m.max
		}
	}
	m.put()
}

func (m *cwModule) holeTill(at int64) int64 {
	switch {
	case at < m.b[1]:
		return m.b[1]
	case at < m.b[2]:
		return m.b[2]
	}
	return at
}

func (m *cwModule) hold(now, till int64) {
	if till > m.s.hold {
		m.s.hold = till
		m.put()
	}
}

func (m *cwModule) flag() { m.put() }

func (m *cwModule) save() (memState, bool) {
	m.s.till = m.s.e
	if m.s.till == 0 {
		m.s.till = m.s.w + 2*(m.b[2]-m.b[1])
	}
	switch {
	case !m.kept:
		return nil, false
	case m.prev != nil:
		*m.prev = m.s
		return m.prev, true
	}
	s := m.s
	return &s, true
}

func (m *cwModule) fromHole(*hole, int) pico { return pico{} }
