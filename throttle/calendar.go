package throttle

import (
	"time"

	"github.com/sluicehq/sluice/internal/calendar"
)

// This file is FixedWindow's calendar unit: windows that are days, ISO weeks
// or months in a zone (FixedWindow.Calendar, FixedWindow.Zone). Their
// boundaries come from Go's time package, so a day across a daylight-saving
// change is 23 or 25 hours and a month has its real length; the store counts
// them with lua/cw.lua (and cwModule, its twin in memory), given the
// boundaries of the window of now and of the next one.

// calendar reports whether p counts calendar windows.
func (p FixedWindow) calendar() bool { return p.Calendar != "" }

// zone is p's Zone, UTC if nil.
func (p FixedWindow) zone() *time.Location {
	if p.Zone == nil {
		return time.UTC
	}
	return p.Zone
}

// checkCalendar validates p's calendar unit and zone.
func (p FixedWindow) checkCalendar() error {
	switch {
	case !p.calendar() && p.Zone != nil:
		return invalidf("a zone (%v) needs a calendar unit: day, week or month", p.Zone)
	case !p.calendar():
		return nil
	case !calendar.Unit(p.Calendar).Valid():
		return invalidf("calendar unit %q is not day, week or month", p.Calendar)
	case p.Window != 0:
		return invalidf("a window of %v and a calendar unit (%s) are two lengths: set one", p.Window, p.Calendar)
	}
	return nil
}

// bounds are the starts, in µs, of the calendar window that holds now, of
// the next one and of the one after (calendar.Bounds): a2..a4 of lua/cw.lua.
func (p FixedWindow) bounds(now int64) [3]int64 {
	b := calendar.Bounds(calendar.Unit(p.Calendar), time.UnixMicro(now), p.zone())
	return [3]int64{b[0].UnixMicro(), b[1].UnixMicro(), b[2].UnixMicro()}
}

// argsAt are p's arguments for a call at now (µs, the caller's reading of
// the store's clock): Max and, for a calendar unit, the boundaries of the
// windows of now and the next one. lua/cw.lua refuses a call whose now the
// boundaries do not hold (a client clock that is ahead of the store's across
// a boundary) until the window starts.
func (p FixedWindow) argsAt(now int64) [4]int64 {
	if !p.calendar() {
		return p.args()
	}
	b := p.bounds(now)
	return [4]int64{int64(p.Max), b[0], b[1], b[2]}
}

// withQuota fills st's Used and Resets if a is a calendar window, for a
// Peek at now (µs, the store's clock).
func withQuota(st State, a algo, now int64) State {
	if a.kind() != kindCW {
		return st
	}
	p, ok := a.(FixedWindow)
	if pp, isPtr := a.(*FixedWindow); isPtr {
		p, ok = *pp, true
	}
	if ok {
		st.Used = max(p.Max-st.Remaining, 0)
		st.Resets = time.UnixMicro(p.bounds(now)[1])
	}
	return st
}

// argsOf are a's arguments for a call at now, read from clock only when a
// counts calendar windows.
func argsOf(a algo, clk clock) [4]int64 {
	if a.kind() == kindCW {
		p, ok := a.(FixedWindow)
		if pp, isPtr := a.(*FixedWindow); isPtr {
			p, ok = *pp, true
		}
		if !ok {
			return a.args()
		}
		t := time.Now()
		if clk != nil {
			t = clk.Now()
		}
		return p.argsAt(t.UnixMicro())
	}
	return a.args()
}
