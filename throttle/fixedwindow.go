package throttle

import (
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
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
// Cancel gives a reservation's n back to its window while that window is the
// latest one with bookings; once a later window has taken bookings, nothing
// goes back (the later requests already went past it).
//
// Max must be from 1 to 1<<30, Window a whole number of microseconds from 1 ms
// to about three years. The zero FixedWindow is invalid. A changed Max applies
// on the key's next call; a changed Window starts the key's count afresh.
type FixedWindow struct {
	Max    int           // grants per window
	Window time.Duration // the window's length; windows start at multiples of it since the Unix epoch
}

// minWindow is the shortest window (or sliding window) a policy may have.
const minWindow = time.Millisecond

var (
	//go:embed lua/fixedwindow_reserve.lua
	fixedWindowReserveLua string
	//go:embed lua/fixedwindow_refund.lua
	fixedWindowRefundLua string

	fixedWindowReserveScript = newScript(fixedWindowReserveLua)
	fixedWindowRefundScript  = newRefundScript(fixedWindowRefundLua)
)

func (FixedWindow) isPolicy() {}

// Quota is Max per Window.
func (p FixedWindow) Quota() (int, time.Duration) { return p.Max, p.Window }

func (p FixedWindow) String() string {
	return fmt.Sprintf("%d per %v window", p.Max, p.Window)
}

// Validate reports why p cannot be used, or nil.
func (p FixedWindow) Validate() error {
	if err := checkMax(p.Max); err != nil {
		return err
	}
	return checkWindow(p.Window)
}

func (p FixedWindow) check(n int) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return checkN(n, p.Max, "max")
}

func (FixedWindow) kind() string { return "fw" }

// window is Window in microseconds.
func (p FixedWindow) window() int64 { return int64(p.Window / time.Microsecond) }

func (p FixedWindow) args() []any { return []any{p.Max, p.window()} }

func (FixedWindow) scripts() (reserve, refund *redis.Script) {
	return fixedWindowReserveScript, fixedWindowRefundScript
}

// share is Max/hosts, rounded down but at least 1, per the same Window.
func (p FixedWindow) share(hosts int) algo {
	p.Max = max(1, p.Max/hosts)
	return p
}

// fwState is a FixedWindow key's state: the cursor, the latest window
// anything is booked in and its count. Earlier windows no longer matter: a
// request never goes into a window before the cursor's.
type fwState struct {
	w   int64 // the cursor's window index
	c   int64 // what is booked in window w
	win int64 // Window in µs, as the state was written
}

// idleAt: once the cursor's window has ended, the state says nothing.
func (s *fwState) idleAt(now int64) bool { return now >= (s.w+1)*s.win }

// reserveMem is fixedwindow_reserve.lua in Go; see that file for the contract.
func (p FixedWindow) reserveMem(st *memState, now int64, n int, maxWait int64) decision {
	win, limit, need := p.window(), int64(p.Max), int64(n)
	cur := now / win
	w, c := cur, int64(0)
	s, _ := (*st).(*fwState)
	if s != nil && s.win == win && s.w >= cur {
		w, c = s.w, s.c
	}
	bw, bc := w, c+need // the window the request goes in, and its count after
	if c+need > limit {
		bw, bc = w+1, need
	}
	d := decision{wait: max(0, bw*win-now)}
	if maxWait < 0 || d.wait <= maxWait {
		d.granted, d.tat = true, bw
		w, c = bw, bc
		if s == nil {
			s = &fwState{}
			*st = s
		}
		*s = fwState{w: w, c: c, win: win}
	}
	d.remaining, d.reset = fwFigures(w, c, cur, win, limit, now)
	return d
}

// fwFigures are the remaining and reset of a reply, for the cursor (w, c) at
// now in window cur: what the current window has left (nothing if the cursor
// has moved past it), and the wait until a request for Max would be granted
// (the start of the window after the last one with bookings).
func fwFigures(w, c, cur, win, limit, now int64) (remaining int, reset int64) {
	if w == cur {
		remaining = int(max(0, limit-c))
	}
	end := w * win
	if c > 0 {
		end += win
	}
	return remaining, max(0, end-now)
}

// refundMem is fixedwindow_refund.lua in Go, without the marker.
func (p FixedWindow) refundMem(st *memState, _ int64, n int, d decision) {
	if s, _ := (*st).(*fwState); s != nil && s.win == p.window() && s.w == d.tat {
		s.c = max(0, s.c-int64(n))
	}
}
