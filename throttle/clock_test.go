package throttle

import (
	"sync"
	"time"
)

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

// base is a realistic instant, so float arithmetic works at today's magnitudes.
var base = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func newFakeClock() *fakeClock { return &fakeClock{t: base} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// at sets the clock to base + us microseconds.
func (c *fakeClock) at(us int64) {
	c.mu.Lock()
	c.t = base.Add(time.Duration(us) * time.Microsecond)
	c.mu.Unlock()
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
