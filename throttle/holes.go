package throttle

import "sort"

// hole is a cancelled turn offered to later callers: n of n0 units that a
// request may take at any time in [at, till). handle is the cancelled
// reservation's, 0 for a turn that was itself taken from a hole (it is not
// released). See lua/holes.lua, which this mirrors for a memory store.
type hole struct {
	at, till int64
	n, n0    int
	handle   pico
}

// maxHoles bounds a key's holes; past it a refund releases at once.
const maxHoles = 1000

// holes are one key's holes, in the order they were made, and, for a token
// or leaky bucket, the latest slot of a booking that may lie nearer its TAT
// than a settle counts on (0: none; lua/tat.lua's TAT.near, member p of the
// holes key).
type holes struct {
	list []hole
	near int64
}

// before is the order in which holes are taken and released, as in
// lua/holes.lua: by till, then at, then handle, then n.
func (h hole) before(o hole) bool {
	switch {
	case h.till != o.till:
		return h.till < o.till
	case h.at != o.at:
		return h.at < o.at
	case h.handle != o.handle:
		return h.handle.less(o.handle)
	}
	return h.n < o.n
}

// expire releases and drops the holes whose span is over.
func (hs *holes) expire(now int64, m module) {
	var gone []hole
	k := 0
	for _, h := range hs.list {
		if h.till > now {
			hs.list[k] = h
			k++
		} else {
			gone = append(gone, h)
		}
	}
	clear(hs.list[k:])
	hs.list = hs.list[:k]
	if len(gone) > 0 && k == 0 {
		m.flag()
	}
	sortHoles(gone)
	for _, h := range gone {
		if h.handle != (pico{}) {
			m.release(now, h.n, h.handle)
		}
	}
}

func sortHoles(l []hole) { sort.SliceStable(l, func(i, j int) bool { return l[i].before(l[j]) }) }

// best is the earliest time at or after t at which a hole serves n, and its
// index; -1 if none does.
func (hs *holes) best(t int64, n int) (int64, int) {
	at, i := int64(0), -1
	for j, h := range hs.list {
		if h.n < n {
			continue
		}
		if x := max(h.at, t); x < h.till && (i < 0 || x < at || (x == at && h.before(hs.list[i]))) {
			at, i = x, j
		}
	}
	return at, i
}

// take serves n from hole i and returns the grant's handle. What is left
// of it starts where m says a turn after n starts.
func (hs *holes) take(i, n int, m module) pico {
	h := &hs.list[i]
	handle := m.fromHole(h, n)
	if h.n -= n; h.n == 0 {
		hs.drop(i, m)
	}
	return handle
}

// add makes a hole of a cancelled turn of n at `at`, or releases it at once
// if its span is over or the key has maxHoles.
func (hs *holes) add(now int64, m module, n int, at int64, handle pico) {
	till := m.holeTill(at)
	if till <= now || len(hs.list) >= maxHoles {
		if handle != (pico{}) {
			m.release(now, n, handle)
		}
		return
	}
	hs.list = append(hs.list, hole{at: at, till: till, n: n, n0: n, handle: handle})
	if len(hs.list) == 1 {
		m.flag()
	}
}

// drop removes hole i; m's flag goes with the last one.
func (hs *holes) drop(i int, m module) {
	hs.list = append(hs.list[:i], hs.list[i+1:]...)
	if len(hs.list) == 0 {
		m.flag()
	}
}

func (hs *holes) index(f func(hole) bool) int {
	for i, h := range hs.list {
		if f(h) {
			return i
		}
	}
	return -1
}

// clear releases every hole: a cooldown voids the turns they offered.
func (hs *holes) clear(now int64, m module) {
	if len(hs.list) == 0 {
		return
	}
	sortHoles(hs.list)
	for _, h := range hs.list {
		if h.handle != (pico{}) {
			m.release(now, h.n, h.handle)
		}
	}
	hs.list = nil
	m.flag()
}
