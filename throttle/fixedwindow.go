package throttle

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/calendar"
)

// FixedWindow grants at most Max per window of length Window. Windows are
// aligned on the store's clock: window i runs from i·Window to (i+1)·Window
// after the Unix epoch, so a Window of a minute counts calendar minutes and
// one of 24 hours counts UTC days. It keeps a quota stated that way ("100 per
// calendar minute"); across a window's edge it may grant up to 2·Max in a
// short span (Max at the end of one window, Max at the start of the next).
// SlidingLog bounds every span of Window exactly; SlidingWindow, about.
//
// A request for n goes into the latest window that has bookings if n fits
// there, and otherwise into the window after it; its wait runs until its
// window starts (no wait if it has). So requests are served in arrival order:
// none goes into an earlier window than one booked before it, even if a small
// request would fit in what an earlier window has left. TryAcquire's
// Remaining is what the current window has left, its ResetAfter the time
// until the windows with bookings are over.
//
// Cancel gives a reservation's n back to its window's count while that
// window is the latest one with bookings; once a later window has bookings,
// the n places stay in their window for the next callers to take, until it
// ends (see Reservation.Cancel).
//
// A calendar quota ("2000 a day, resetting at midnight Pacific time") sets
// Calendar and Zone instead of Window: the windows are the days, ISO weeks
// (from Monday 00:00) or months (from the 1st, 00:00) of Zone, with their
// real lengths (a day across a daylight-saving change is 23 or 25 hours).
// Requests line up as in any FixedWindow, into the window of now or the next
// one; a request that would need a later window is refused (Acquire too,
// with a *LimitedError, as for a full LeakyBucket), with RetryAfter until
// the window it would need starts, and a settled cost beyond Max is carried
// into the next window at most. Calendar keys live under their own suffix (":cw"),
// so a changed unit or zone starts the key's count afresh.
//
// Max must be from 1 to 1<<30, Window a whole number of microseconds from 1 ms
// to about three years (or zero with a Calendar unit). The zero FixedWindow
// is invalid. A changed Max applies on the key's next call: what the window
// counted still counts, what is left follows the new Max. A changed Window
// starts the key's count afresh.
type FixedWindow struct {
	Max    int           // grants per window
	Window time.Duration // the window's length; windows start at multiples of it since the Unix epoch

	// Calendar is "day", "week" or "month" for windows of the calendar in
	// Zone, with Window zero; "" for windows of length Window.
	Calendar string
	// Zone is the calendar's time zone (time.LoadLocation); nil is UTC.
	Zone *time.Location
}

// minWindow is the shortest window (or sliding window) a policy may have.
const minWindow = time.Millisecond

func (FixedWindow) isPolicy() {}

// quota is Max per Window.
// A calendar unit's is its nominal length (a day 24 h, a month 30 days).
func (p FixedWindow) quota() (int, time.Duration) {
	if p.calendar() {
		return p.Max, calendar.Unit(p.Calendar).Nominal()
	}
	return p.Max, p.Window
}

func (p FixedWindow) String() string {
	if p.calendar() {
		return fmt.Sprintf("%d per %s in %v", p.Max, p.Calendar, p.zone())
	}
	return fmt.Sprintf("%d per %v window", p.Max, p.Window)
}

// validate reports why p cannot be used, or nil (see Validate).
func (p FixedWindow) validate() error {
	if err := checkMax(p.Max); err != nil {
		return err
	}
	if err := p.checkCalendar(); err != nil || p.calendar() {
		return err
	}
	return checkWindow(p.Window)
}

func (p FixedWindow) check(n int) error {
	if err := p.validate(); err != nil {
		return err
	}
	return checkN(n, p.Max, "max")
}

func (p FixedWindow) kind() kind {
	if p.calendar() {
		return kindCW
	}
	return kindFW
}

// window is Window in microseconds.
func (p FixedWindow) window() int64 { return int64(p.Window / time.Microsecond) }

func (p FixedWindow) args() [4]int64 { return [4]int64{int64(p.Max), p.window()} }

// share is Max/hosts, rounded down but at least 1, per the same Window.
func (p FixedWindow) share(hosts int) algo {
	p.Max = max(1, p.Max/hosts)
	return p
}

// fwState is a FixedWindow key's state, the hash of lua/fw.lua: the cursor
// (the latest window anything is booked in, and its count) and a cooldown's
// end. Earlier windows no longer matter: a request never goes into a window
// before the cursor's, except through a hole.
type fwState struct {
	w    int64 // the cursor's window index
	c    int64 // what is booked in window w
	win  int64 // Window in µs, as the state was written
	hold int64 // a cooldown's end, µs; 0: none
}

// idleAt: once the cursor's window and any cooldown have ended, the state says nothing.
func (s *fwState) idleAt(now int64) bool { return now >= max((s.w+1)*s.win, s.hold) }

func (p FixedWindow) open(st memState, now, cool int64) module {
	if p.calendar() {
		return p.openCW(st, now, cool)
	}
	win := p.window()
	cur := now / win
	m := &fwModule{max: int64(p.Max), s: fwState{w: cur, win: win}, cur: cur, fresh: true}
	if s, ok := st.(*fwState); ok {
		m.prev = s
		m.s.hold = s.hold
		if s.win == win {
			m.fresh = false
			if s.w >= cur {
				m.s.w, m.s.c = s.w, s.c
			}
		}
	}
	return m
}

// fwModule is lua/fw.lua in Go.
type fwModule struct {
	max   int64
	s     fwState
	cur   int64 // the window of now
	fresh bool  // no state under this Window
	kept  bool  // the call wrote the state
	prev  *fwState
}

func (m *fwModule) tail(now int64, n int, _ int64) (int64, bool, int64) {
	e := m.s.w * m.s.win
	if m.s.c+int64(n) > m.max {
		e += m.s.win
	}
	return max(e, now, m.s.hold), true, 0
}

func (m *fwModule) commit(_, s int64, n int) pico {
	if ws := s / m.s.win; ws == m.s.w {
		m.s.c += int64(n)
	} else {
		m.s.w, m.s.c = ws, int64(n)
	}
	m.kept, m.fresh = true, false
	return whole(m.s.w)
}

func (m *fwModule) figures(now int64) (int, int64) {
	left := 0
	if m.s.w == m.cur {
		left = int(max(0, m.max-m.s.c))
	}
	end := m.s.w * m.s.win
	if m.s.c > 0 {
		end += m.s.win
	}
	return left, max(0, end-now, m.s.hold-now)
}

func (m *fwModule) isTail(handle pico, _ int64, _ int) bool { return m.s.w == handle.us }

func (m *fwModule) has(_ int64, handle pico) bool { return !m.fresh && handle.us <= m.s.w }

func (m *fwModule) rollback(_ int64, n int, _ pico, _ *holes) {
	m.s.c = max(0, m.s.c-int64(n))
	m.kept = true
}

func (m *fwModule) release(int64, int, pico) {}

// settle is lua/fw.lua's: the booking's window is its slot's (a grant from
// a hole too). Less comes off the count if that window is still the cursor's; more goes on the cursor's window, and past Max on
// to the windows after it, each full.
func (m *fwModule) settle(now int64, n, used int, _ pico, slot int64, _ *holes) {
	if used < n {
		if m.fresh || floorDiv(slot, m.s.win) != m.s.w {
			return
		}
		m.s.c = max(0, m.s.c-int64(n-used))
	} else {
		w, c := m.s.w, m.s.c+int64(used-n)
		if c > m.max {
			q := min((c-1)/m.max, floorDiv(now+maxSpan, m.s.win)-w)
			w, c = w+q, c-q*m.max
		}
		m.s.w, m.s.c = w, c
	}
	m.kept, m.fresh = true, false
}

func (m *fwModule) holeTill(at int64) int64 { return (at/m.s.win + 1) * m.s.win }

func (m *fwModule) hold(_, till int64) {
	if till > m.s.hold {
		m.s.hold = till
		m.kept = true
	}
}

func (m *fwModule) flag() { m.kept, m.fresh = true, false }

func (m *fwModule) save() (memState, bool) {
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

func (m *fwModule) fromHole(*hole, int) pico { return pico{} }
