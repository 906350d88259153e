package integration

import (
	"sync/atomic"
	"testing"
	"time"
)

// jitterProbe measures how late this machine runs a goroutine that asked to
// wake: it sleeps probeTick over and over and keeps the worst overshoot. On
// a quiet machine that is well under a millisecond; on a loaded one (two
// cores shared by three workers, redis-server and the race-enabled test
// binary, or other packages' tests run at the same time by go test ./...)
// it can reach tens of milliseconds, and a worker's timer, or the upstream's
// handler, is late by as much. Checks on arrival times add it to their
// tolerance, so that they allow for the jitter the machine showed during the
// test and nothing more.
type jitterProbe struct {
	worst atomic.Int64 // ns
	stop  chan struct{}
	done  chan struct{}
}

// probeTick is how long the probe sleeps between looks at the clock.
const probeTick = 2 * time.Millisecond

// startJitterProbe starts a probe that runs until tb ends.
func startJitterProbe(tb testing.TB) *jitterProbe {
	p := &jitterProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	tb.Cleanup(func() {
		close(p.stop)
		<-p.done
	})
	return p
}

func (p *jitterProbe) run() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		default:
		}
		start := time.Now()
		time.Sleep(probeTick)
		if late := time.Since(start) - probeTick; late > time.Duration(p.worst.Load()) {
			p.worst.Store(int64(late))
		}
	}
}

// Reset forgets what the probe has seen: a test calls it when the part it
// measures begins, so that starting processes does not count.
func (p *jitterProbe) Reset() { p.worst.Store(0) }

// Worst is the latest the probe has woken so far; 0 for a nil probe.
func (p *jitterProbe) Worst() time.Duration {
	if p == nil {
		return 0
	}
	return time.Duration(p.worst.Load())
}
