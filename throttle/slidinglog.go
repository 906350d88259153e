package throttle

import (
	"fmt"
	"sort"
	"time"
)

// SlidingLog grants at most Max tokens in any span of time of length Window,
// exactly. Each key keeps a log of its grants' times, one entry per token; a
// request that would overfill the window is booked at the earliest time at
// which enough of the oldest grants have left it.
//
// Windows are half-open: a token granted at g counts in the window ending at x
// when x−Window < g ≤ x, so a grant exactly Window old no longer counts. For
// every x, at most Max tokens are granted with times in (x−Window, x].
//
// A request for n is granted at the earliest t, no earlier than now and no
// earlier than any grant or booking before it (callers line up in arrival
// order), at which the window ending at t holds at most Max−n grants. A wait
// is the time until t; Acquire sleeps exactly that long, and a refused call's
// RetryAfter is that long too. Reservation.Cancel of the last booking takes
// its entries out of the log (grants older than the log's newest Max
// entries, which it no longer holds, still count after it); a booking later
// ones stand on leaves its instant to the next caller, and its entries come
// out if nobody takes it (see Reservation.Cancel).
//
// Max must be from 1 to 10000: a key holds at most Max entries, about 11
// bytes each in Redis (a list, 107 KB at Max 10000, that expires Window after
// its last entry, rounded up to a period of min(Window, 1 s), and a second). Window must be a whole number of microseconds from 1 ms to
// about three years. The zero SlidingLog is invalid. A changed Max or Window
// applies on the key's next call, to the entries the log holds: its newest
// (old) Max. For constant memory per key, see SlidingWindow.
type SlidingLog struct {
	Max    int           // tokens granted in any span of Window, at most
	Window time.Duration // the span
}

// maxLogMax bounds SlidingLog.Max: a key's memory is O(Max), and a script
// call touches up to Max entries.
const maxLogMax = 10000

// window is Window in microseconds.
func (l SlidingLog) window() int64 { return int64(l.Window / time.Microsecond) }

// validate reports why l cannot be used, or nil (see Validate).
func (l SlidingLog) validate() error {
	if l.Max > maxLogMax {
		return invalidf("max %d is larger than %d", l.Max, maxLogMax)
	}
	if err := checkMax(l.Max); err != nil {
		return err
	}
	return checkWindow(l.Window)
}

func (l SlidingLog) check(n int) error {
	if err := l.validate(); err != nil {
		return err
	}
	return checkN(n, l.Max, "max")
}

// quota is Max tokens per Window.
func (l SlidingLog) quota() (int, time.Duration) { return l.Max, l.Window }

func (l SlidingLog) String() string { return fmt.Sprintf("%d per %v sliding log", l.Max, l.Window) }

func (SlidingLog) isPolicy() {}

func (SlidingLog) kind() kind { return kindSL }

func (l SlidingLog) args() [4]int64 { return [4]int64{int64(l.Max), l.window()} }

// share is Max/hosts, at least 1, in the same Window.
func (l SlidingLog) share(hosts int) algo {
	l.Max = max(1, l.Max/hosts)
	return l
}

// slidingLogState is one key's log in a memory store, as the Redis list holds
// it: grant times in µs, oldest first, non-decreasing.
//
// The log keeps only its newest Max entries. That loses nothing: every entry
// dropped by a grant at t is at or before the entry the grant waited for
// (e_{k−Max+n} ≤ t−Window, see earliest), and every later grant is at or after
// t, so the dropped entries are outside every window that can still matter. A
// refund may take entries off the end and so move the log's end back before
// t; it then puts copies of a stand-in value at the front (see refundMem), so
// that what was dropped still counts.
type slidingLogState struct {
	log   []int64
	until int64 // when the last entry leaves the window: idle from then on
}

func (s *slidingLogState) idleAt(now int64) bool { return s.until <= now }

// earliest is the time a request for n at now is granted on log: no earlier
// than now or the last entry, and, if the log holds k ≥ Max−n+1 entries, no
// earlier than e_{k−Max+n}+Window, when all but the newest Max−n of them have
// left the window. The log is sorted, so counting the entries in (t−Window, t]
// comes down to where e_{k−Max+n} lies. Entries at or after t cannot exist:
// every booking is at or after the last entry.
func (l SlidingLog) earliest(log []int64, now int64, n int) int64 {
	t := now
	if k := len(log); k > 0 {
		t = max(t, log[k-1])
		if i := k - l.Max + n; i >= 1 {
			t = max(t, log[i-1]+l.window())
		}
	}
	return t
}

// status is what a request at now could have at once, and the µs until the
// log's last entry leaves the window. Nothing can be had at once while a
// booking lies ahead (callers line up); otherwise Max less the entries in
// (now−Window, now], the largest n that earliest would grant at now.
func (l SlidingLog) status(log []int64, now int64) (remaining int, reset int64) {
	k := len(log)
	if k == 0 {
		return l.Max, 0
	}
	last := log[k-1]
	reset = max(0, last+l.window()-now)
	if last > now {
		return 0, reset
	}
	edge := now - l.window()
	in := k - sort.Search(k, func(i int) bool { return log[i] > edge })
	return max(0, l.Max-in), reset
}

func (l SlidingLog) open(st memState, now, cool int64) module {
	m := &slModule{l: l, cool: cool}
	if s, ok := st.(*slidingLogState); ok && !s.idleAt(now) {
		// lua/sl.lua's trim: the entries no window ending at now or later holds go.
		edge := now - l.window()
		m.log = s.log[sort.Search(len(s.log), func(i int) bool { return s.log[i] > edge }):]
	}
	return m
}

// slModule is lua/sl.lua in Go.
type slModule struct {
	l     SlidingLog
	log   []int64
	cool  int64 // a cooldown's end (the marker), 0: none
	wrote bool
}

func (m *slModule) tail(now int64, n int, _ int64) (int64, bool, int64) {
	return max(m.l.earliest(m.log, now, n), m.cool), true, 0
}

func (m *slModule) commit(_, s int64, n int) pico {
	for range n {
		m.log = append(m.log, s)
	}
	if drop := len(m.log) - m.l.Max; drop > 0 {
		m.log = m.log[drop:]
	}
	m.wrote = true
	return whole(s)
}

func (m *slModule) figures(now int64) (int, int64) { return m.l.status(m.log, now) }

func (m *slModule) last() (int64, bool) {
	if len(m.log) == 0 {
		return 0, false
	}
	return m.log[len(m.log)-1], true
}

func (m *slModule) isTail(handle pico, _ int64, _ int) bool {
	last, ok := m.last()
	return ok && last == handle.us
}

func (m *slModule) has(now int64, handle pico) bool {
	last, ok := m.last()
	return ok && last > now && handle.us <= last
}

// rollback takes up to n entries equal to the reservation's time t off the
// log, the last ones, and puts as many stand-ins at the front.
//
// Taking grants out can only loosen the limit, but the log dropped its old
// entries on the ground that its end never moves back (see slidingLogState),
// and a rollback moves it back. With Max 2: grants at 0 and 0, then a booking
// at Window drops one 0; taking the booking out would leave [0], and a grant
// at once would put three grants in one window. So each entry taken out is
// replaced by a stand-in at or after every entry the log dropped, so that it
// counts for at least as long: the log's first entry (everything dropped is
// at or before it), or t−Window if that is earlier and no entry comes after
// t. (Then every grant that stands is at or before t; those after t−Window
// share the window ending at t, so there are at most Max−n of them, and the
// log still holds at least that many entries after t−Window.) Each entry only
// moves earlier, so the log is never stricter than before.
func (m *slModule) rollback(now int64, n int, handle pico, _ *holes) {
	t := handle.us
	log := m.log
	if len(log) == 0 {
		return
	}
	end := len(log) // the run of entries equal to t ends here
	for end > 0 && log[end-1] > t {
		end--
	}
	start := end
	for start > 0 && log[start-1] == t && end-start < n {
		start--
	}
	k := end - start
	if k == 0 {
		return
	}
	pad := log[0]
	if end == len(log) {
		pad = min(pad, t-m.l.window())
	}
	out := make([]int64, 0, len(log))
	if pad > now-m.l.window() { // else no window that matters holds it: as open's trim
		for range k {
			out = append(out, pad)
		}
	}
	out = append(out, log[:start]...)
	out = append(out, log[end:]...)
	m.log = out
	if len(out) == 0 || out[len(out)-1]+m.l.window() <= now {
		m.log = nil
	}
	m.wrote = true
}

func (m *slModule) release(now int64, n int, t pico) { m.rollback(now, n, t, nil) }

// settle is lua/sl.lua's: the booking's entries are at its slot t (a grant
// from a hole's too). Less comes out of the log as a rollback takes it;
// more goes in at the booking's time t, after the entries at t and before
// later ones, if a window that still matters (after now − Window) holds t;
// the log keeps its newest Max.
func (m *slModule) settle(now int64, n, used int, _ pico, t int64, _ *holes) {
	if used < n {
		m.rollback(now, n-used, whole(t), nil)
		return
	}
	if t <= now-m.l.window() {
		return
	}
	k := min(used-n, m.l.Max)
	i := sort.Search(len(m.log), func(i int) bool { return m.log[i] > t })
	out := make([]int64, 0, len(m.log)+k)
	out = append(out, m.log[:i]...)
	for range k {
		out = append(out, t)
	}
	out = append(out, m.log[i:]...)
	if drop := len(out) - m.l.Max; drop > 0 {
		out = out[drop:]
	}
	m.log = out
	m.wrote = true
}

func (m *slModule) holeTill(at int64) int64 { return at + 1 }

func (m *slModule) hold(_, till int64) { m.cool = max(m.cool, till) }

func (m *slModule) flag() {}

func (m *slModule) save() (memState, bool) {
	if len(m.log) == 0 {
		return nil, m.wrote
	}
	return &slidingLogState{log: m.log, until: m.log[len(m.log)-1] + m.l.window()}, m.wrote
}

func (m *slModule) fromHole(*hole, int) pico { return pico{} }
