package throttle

// tatState is a token or leaky bucket's state in a memory store, as
// lua/tat.lua keeps it: the TAT, the instant at which the bucket has caught
// up with everything booked, exactly (pico).
type tatState struct{ tat pico }

func (s *tatState) idleAt(now int64) bool { return !whole(now).less(s.tat) }

// tatModule is lua/tat.lua in Go: what token and leaky buckets share.
type tatModule struct {
	tat  pico      // never before now
	t    pico      // T, the time per token
	cool int64     // the cooldown's end, 0: none
	st   *tatState // the key's state, if it has one: save writes it in place
}

func openTAT(st memState, now int64, t pico, cool int64) tatModule {
	m := tatModule{tat: whole(now), t: t, cool: cool}
	if s, ok := st.(*tatState); ok {
		m.st = s
		m.tat = maxPico(s.tat, m.tat)
	}
	return m
}

// commit books n at slot s, counted from the earliest instant that rounds
// up to s (before1) or the TAT, whichever is later, so that a turn taken
// later than the bucket alone needed (another bucket of the call was
// slower) is counted where it is used, and a bucket alone never loses the
// part of a µs its slot was rounded up by. The handle is the TAT before.
func (m *tatModule) commit(_, s int64, n int) pico {
	before := m.tat
	m.tat = m.after(before, s, n)
	return before
}

// after is the TAT a booking of n at slot left, from its handle.
func (m *tatModule) after(handle pico, slot int64, n int) pico { return tatAfter(handle, m.t, slot, n) }

// tatAfter is the TAT a booking of n at slot leaves in a bucket of T t
// whose TAT before it was handle.
func tatAfter(handle, t pico, slot int64, n int) pico {
	return maxPico(handle, before1(slot)).add(t.times(int64(n)))
}

func (m *tatModule) isTail(handle pico, slot int64, n int) bool {
	return m.tat == m.after(handle, slot, n)
}

func (m *tatModule) has(now int64, handle pico) bool {
	return whole(now).less(m.tat) && !m.tat.less(handle)
}

// rollbackTo gives back the latest booking and then each whole hole left at
// the tail, never moving the TAT before floor; self is the module that embeds m.
func (m *tatModule) rollbackTo(self module, handle, floor pico, hs *holes) {
	t := handle
	for floor.less(t) {
		i := hs.index(func(h hole) bool { return h.n == h.n0 && m.after(h.handle, h.at, h.n0) == t })
		if i < 0 {
			break
		}
		t = hs.list[i].handle
		hs.drop(i, self)
	}
	m.tat = maxPico(t, floor)
}

func (m *tatModule) release(int64, int, pico) {}

// settleTo is lua/tat.lua's TAT.settle: the booking with this handle at
// slot took n and really used used. More: a booking of the rest at now, no
// further than maxSpan ahead. Less: while the booking is the latest, the TAT
// goes back to what a booking of used would have left (rollbackTo, never
// before floor); under later bookings by at most A − U, A the least the
// booking's after can be (its slot's instant plus n·T: a settle before may
// have moved it back) and U the latest instant a later booking's turn may
// hold: floor, TAT − c·T, or hs.near. Replaying the bookings with used then
// moves the TAT back by exactly that much. It records in hs.near the slot a
// booking may now have nearer the TAT than that (the settled one, and those
// after it). self is the module that embeds m.
func (m *tatModule) settleTo(self module, now int64, n, used int, handle pico, slot, c int64, floor pico, hs *holes) {
	if used > n {
		t := m.tat.add(m.t.times(int64(used - n)))
		if lim := whole(now + maxSpan); !t.less(lim) {
			t = lim
		}
		m.tat = t
		return
	}
	a := m.after(handle, slot, n)
	if m.tat == a {
		to := handle
		if used > 0 {
			to = m.after(handle, slot, used)
		}
		m.rollbackTo(self, to, floor, hs)
		hs.near = max(hs.near, slot)
		return
	}
	// Under later bookings the booking's after, as a replay would find it
	// now, may lie before a: an earlier settle may have moved it back. It
	// is no earlier than the slot's instant plus n·T.
	if a = m.after(pico{}, slot, n); !m.has(now, handle) || m.tat.less(a) {
		return
	}
	u := maxPico(floor, m.tat.subTimes(m.t, c))
	if u.less(whole(hs.near)) {
		u = whole(hs.near)
	}
	if !u.less(a) {
		return
	}
	g := a.sub(u)
	if k := m.t.times(int64(n - used)); k.less(g) {
		g = k
	}
	m.tat = m.tat.sub(g)
	hs.near = max(hs.near, slot, u.ceil())
}

// figuresOf is a TAT bucket's figures for a size of size tokens (a token
// bucket's burst, a leaky bucket's capacity): what is left of it at now,
// size − ⌈ahead/T⌉ and at least 0 where the TAT is ahead of now (for a
// token bucket that is ⌊(size·T − ahead)/T⌋), and µs until it has caught
// up with everything booked.
func (m *tatModule) figuresOf(now, size int64) (int, int64) { return tatFigures(m.tat, m.t, size, now) }

// tatFigures is figuresOf for a bucket of T t whose TAT is tat.
func tatFigures(tat, t pico, size, now int64) (int, int64) {
	reset := tat.ceil() - now
	ahead := tat.sub(whole(now))
	if ahead.us >= fitsPS || t.us >= fitsPS { // the quotient must be small
		if !ahead.less(t.times(size)) {
			return 0, reset
		}
	}
	return int(max(0, size-ceilDivPico(ahead, t))), reset
}

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

// instant is when the turn of hole h was booked: its handle is the TAT
// before it, its at its slot (after).
func (m *tatModule) instant(h *hole) pico { return maxPico(h.handle, before1(h.at)) }

// fromHole: a grant from a hole has the turn's instant for its handle, as
// the TAT before a booking at that instant would be; on a token bucket the
// rest of the hole stays where it is.
func (m *tatModule) fromHole(h *hole, _ int) pico { return m.instant(h) }
