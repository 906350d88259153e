package throttle

import (
	"sync"
	"sync/atomic"
)

// The modes of a Limiter under FailClosed and FailOpen while its store cannot
// answer, as Mode and WithModeChange report them (FailLocal's is ModeFallback).
const (
	// ModeClosed: under FailClosed, the store has failed and calls fail with
	// its error until it answers again.
	ModeClosed = "closed"
	// ModeOpen: under FailOpen, the store has failed and calls are granted
	// without a limit until it answers again.
	ModeOpen = "open"
)

// health follows the store under FailClosed and FailOpen, so that Mode and
// WithModeChange say when it went down and when it came back: the first
// failed call switches to the policy's down mode, the first answered call
// back to ModeShared. It starts no goroutines: like FailLocal's fallback, it
// moves only as calls end.
type health struct {
	downMode string
	onChange func(mode string, err error)

	down atomic.Bool // read without mu on the fast path
	mu   sync.Mutex  // makes changes one at a time, in order
}

func newHealth(c config) *health {
	h := &health{downMode: ModeClosed, onChange: c.onModeChange}
	if c.failure == FailOpen {
		h.downMode = ModeOpen
	}
	return h
}

// record notes what a store call said. A nil h (FailLocal, whose fallback
// keeps its own mode) records nothing.
func (h *health) record(v verdict, err error) {
	if h == nil || v == unknown || (v == failed) == h.down.Load() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	down := v == failed
	if down == h.down.Load() {
		return
	}
	h.down.Store(down)
	if h.onChange == nil {
		return
	}
	if down {
		h.onChange(h.downMode, err)
	} else {
		h.onChange(ModeShared, nil)
	}
}

// mode is ModeShared, or the down mode while the store is failing.
func (h *health) mode() string {
	if h != nil && h.down.Load() {
		return h.downMode
	}
	return ModeShared
}
