package throttle

import (
	"fmt"
	"time"
)

// SlidingWindow grants about Max in any span of length Window, in constant
// memory per key: the sliding window counter. Window is cut into Slots slots
// of length slot = Window/Slots, aligned on the store's clock (slot j runs
// from j·slot to (j+1)·slot after the Unix epoch), and a key keeps one count
// per slot for the last Slots+1 slots. At a time t in slot s, the span
// (t−Window, t] is estimated as the counts of slots s−Slots+1 through s plus
// the count of slot s−Slots, the one the span covers only in part, weighted by
// the part it covers:
//
//	est(t) = count[s−Slots+1 … s] + count[s−Slots] · (1 − (t − start(s))/slot)
//
// A request for n is granted at the earliest t, to the microsecond, that is no
// earlier than now nor than the start of the latest booking's slot, at which
// est(t) + n ≤ Max. Its wait runs until t; requests line up in arrival order.
// TryAcquire's Remaining is the most a request could have at once, its
// ResetAfter the time until a request for Max could.
//
// What that promises, of the grants it makes:
//
//   - any Slots consecutive whole slots (a Window that starts at a slot's
//     start) hold at most Max, exactly;
//   - any span of length Window, which covers part of one slot at its start,
//     holds at most Max + ⌊c·f⌋, where c is that slot's count and f the part
//     of it the span leaves out. That is fewer than Max + c, so at most
//     2·Max−1; under an even load c is about Max/Slots, and a span holds
//     less than about Max·(1 + 1/Slots).
//
// The estimate weights the partly covered slot by how much of it is inside
// the span, not by when its grants came: the worst case is Max granted in the
// last moments of one slot and, a Window later, as many as the estimate
// allows as that slot's weight fades. A key saturated from its first call
// shows some of that once: its first Max come at once, wherever in their slot
// the first call falls. After that a saturated key grants about Max per
// Window. SlidingLog keeps the exact promise, with memory per grant.
//
// Cancel of a booking in the latest booked slot takes its n off that slot's
// count, so later requests may be granted sooner; one in an earlier slot
// leaves its place, from its time to the slot's end, to the next callers,
// and is uncounted if nobody takes it (see Reservation.Cancel). Requests
// already booked keep their times.
//
// Max must be from 1 to 1<<30. Window must be a whole number of microseconds
// from 1 ms to about three years that Slots divides into whole microseconds.
// Slots must be from 1 to 1000; zero means 10. Max times the slot's length in
// microseconds must be below 2^53, so that Redis's Lua (double precision)
// computes exactly what Go does. The zero SlidingWindow is invalid. A changed
// Max applies on the key's next call, and so does a changed Window or Slots
// that keeps the slot's length; one that changes it starts the key's counts
// afresh.
type SlidingWindow struct {
	Max    int           // about the most any span of Window holds; exactly the most any Slots whole slots hold
	Window time.Duration // the span
	Slots  int           // the slots a Window is cut into; 0 means 10
}

const (
	// defaultSlots is a SlidingWindow's Slots when zero.
	defaultSlots = 10
	// maxSlots bounds a SlidingWindow's Slots: each call may look at every slot.
	maxSlots = 1000
	// maxExact bounds the products of counts and microseconds a SlidingWindow's
	// scripts compute: below it, Lua's doubles hold integers exactly.
	maxExact = 1 << 53
)

func (SlidingWindow) isPolicy() {}

// quota is Max per Window.
func (p SlidingWindow) quota() (int, time.Duration) { return p.Max, p.Window }

func (p SlidingWindow) String() string {
	return fmt.Sprintf("%d per sliding %v in %d slots", p.Max, p.Window, p.slots())
}

// validate reports why p cannot be used, or nil (see Validate).
func (p SlidingWindow) validate() error {
	if err := checkMax(p.Max); err != nil {
		return err
	}
	if err := checkWindow(p.Window); err != nil {
		return err
	}
	s := p.slots()
	switch {
	case s < 1 || s > maxSlots:
		return invalidf("slots %d must be from 1 to %d", p.Slots, maxSlots)
	case p.window()%int64(s) != 0:
		return invalidf("window %v is not a whole number of microseconds per slot over %d slots", p.Window, s)
	case p.slotLen() > (maxExact-1)/int64(p.Max):
		return invalidf("max %d over slots of %v is too large to count exactly", p.Max, micros(p.slotLen()))
	}
	return nil
}

func (p SlidingWindow) check(n int) error {
	if err := p.validate(); err != nil {
		return err
	}
	return checkN(n, p.Max, "max")
}

func (p SlidingWindow) slots() int {
	if p.Slots == 0 {
		return defaultSlots
	}
	return p.Slots
}

// window is Window in microseconds.
func (p SlidingWindow) window() int64 { return int64(p.Window / time.Microsecond) }

// slotLen is a slot's length in microseconds.
func (p SlidingWindow) slotLen() int64 { return p.window() / int64(p.slots()) }

func (SlidingWindow) kind() kind { return kindSW }

func (p SlidingWindow) args() [4]int64 {
	return [4]int64{int64(p.Max), p.slotLen(), int64(p.slots())}
}

// share is Max/hosts, rounded down but at least 1, over the same Window and Slots.
func (p SlidingWindow) share(hosts int) algo {
	p.Max = max(1, p.Max/hosts)
	return p
}

// swState is a SlidingWindow key's state, the hash of lua/sw.lua.
type swState struct {
	slot  int64           // the slot's length in µs, as the state was written
	b     int64           // the latest slot anything is booked in
	count map[int64]int64 // slot index → count, for slots b−Slots … b whose count is not 0
	hold  int64           // a cooldown's end, µs; 0: none
	until int64           // when the Redis key would expire: the state no longer matters, µs
}

func (s *swState) idleAt(now int64) bool { return now >= s.until }

func (p SlidingWindow) open(st memState, now, _ int64) module {
	m := &swModule{max: int64(p.Max), L: p.slotLen(), S: int64(p.slots()), now: now, fresh: true}
	if s, ok := st.(*swState); ok && !s.idleAt(now) {
		m.holdEnd = s.hold
		if s.slot == m.L {
			m.fresh, m.b, m.booked = false, s.b, true
			m.count = s.count
		}
	}
	return m
}

// swModule is lua/sw.lua in Go.
type swModule struct {
	max, L, S int64
	b         int64 // the latest booked slot, if booked
	booked    bool
	count     map[int64]int64 // nil reads as all zeros
	holdEnd   int64           // a cooldown's end, µs; 0: none
	now       int64
	fresh     bool // no state under this slot length
	wrote     bool
}

func (m *swModule) tail(now int64, n int, _ int64) (int64, bool, int64) {
	L, S, need := m.L, m.S, int64(n)
	lower := max(now, m.holdEnd)
	if m.booked {
		lower = max(lower, m.b*L)
	}
	// The earliest t ≥ lower with est(t) + n ≤ Max, slot by slot: in slot j,
	// est(t) + n ≤ Max when full + n ≤ Max and
	// old·(L − (t − j·L)) ≤ (Max − n − full)·L. Beyond the latest booked slot
	// b every count is 0, so by slot b+Slots+1 at the latest it holds.
	j := floorDiv(lower, L)
	j0 := j
	var full int64 // count[j−S+1 … j]
	for i, c := range m.count {
		if i > j-S && i <= j {
			full += c
		}
	}
	for {
		old := m.count[j-S]
		if r := m.max - need - full; r >= 0 {
			var off int64 // the earliest offset into slot j
			if j == j0 {
				off = lower - j*L
			}
			if old > r {
				off = max(off, ceilDiv(L*(old-r), old))
			}
			if off < L {
				return j*L + off, true, 0
			}
		}
		full += m.count[j+1] - m.count[j-S+1]
		j++
	}
}

func (m *swModule) write() {
	if m.fresh || m.count == nil {
		m.count = make(map[int64]int64, 2)
	}
	m.fresh, m.wrote = false, true
}

func (m *swModule) commit(_, s int64, n int) pico {
	j := floorDiv(s, m.L)
	m.write()
	m.count[j] += int64(n)
	m.b, m.booked = j, true
	for i := range m.count {
		if i < j-m.S {
			delete(m.count, i)
		}
	}
	return whole(j)
}

// figures: what a request could have at once (nothing while a later slot has
// bookings), and the wait until a request for Max would be granted, when
// every count has left the window and the latest booked slot has begun.
func (m *swModule) figures(now int64) (int, int64) {
	if !m.booked {
		return int(m.max), 0
	}
	L, S := m.L, m.S
	remaining := 0
	j := floorDiv(now, L)
	if m.b <= j {
		var full int64
		for i, c := range m.count {
			if i > j-S && i <= j {
				full += c
			}
		}
		weighted := ceilDiv(m.count[j-S]*(L-(now-j*L)), L)
		remaining = int(max(0, m.max-full-weighted))
	}
	end := max(m.b*L, m.holdEnd)
	for i := range m.count {
		end = max(end, (i+S+1)*L)
	}
	return remaining, max(0, end-now)
}

func (m *swModule) isTail(handle pico, _ int64, _ int) bool { return m.booked && m.b == handle.us }

func (m *swModule) has(_ int64, handle pico) bool { return m.booked && handle.us <= m.b }

func (m *swModule) rollback(_ int64, n int, handle pico, _ *holes) {
	j := handle.us
	c, ok := m.count[j]
	if m.fresh || !ok {
		return
	}
	m.wrote = true
	if c -= int64(n); c > 0 {
		m.count[j] = c
	} else {
		delete(m.count, j)
	}
}

func (m *swModule) release(now int64, n int, j pico) { m.rollback(now, n, j, nil) }

// settle is lua/sw.lua's: the booking's slot is its slot's (a grant from a
// hole too). Less comes off its count (a rollback);
// more goes on it, if the key still keeps the slot.
func (m *swModule) settle(now int64, n, used int, _ pico, slot int64, _ *holes) {
	j := floorDiv(slot, m.L)
	if used < n {
		m.rollback(now, n-used, whole(j), nil)
		return
	}
	if m.fresh || !m.booked || j < m.b-m.S {
		return
	}
	m.write()
	m.count[j] += int64(used - n)
}

func (m *swModule) holeTill(t int64) int64 { return (floorDiv(t, m.L) + 1) * m.L }

func (m *swModule) hold(_, till int64) {
	if till > m.holdEnd {
		m.holdEnd = till
		m.write()
	}
}

func (m *swModule) flag() { m.write() }

func (m *swModule) save() (memState, bool) {
	if !m.wrote {
		return nil, false
	}
	s := &swState{slot: m.L, b: m.b, count: m.count, hold: m.holdEnd}
	if !m.booked {
		// A cooldown or a flag on a key with no bookings: lua/sw.lua records
		// the slot of now as the latest booked, which bounds nothing.
		s.b = floorDiv(m.now, m.L)
	}
	s.until = max((s.b+m.S+1)*m.L, m.holdEnd)
	for i := range m.count {
		s.until = max(s.until, (i+m.S+1)*m.L)
	}
	return s, true
}

// ceilDiv is a/b rounded up, for a ≥ 0 and b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func (m *swModule) fromHole(*hole, int) pico { return pico{} }
