// Package jitter measures how late this machine wakes a goroutine that asked
// to, for tests and the chaos run that check arrival times.
package jitter

import (
	"sync"
	"time"
)

// Probe sleeps Tick over and over and keeps the worst overshoot of each
// second it has run. On a quiet machine that is well under a millisecond; on
// a loaded one (two cores shared by workers, redis-server and a
// race-enabled test binary) it can reach tens of milliseconds, and a
// worker's timer, an upstream's handler and the loopback are late by as
// much. A request that arrives late, followed by others on time, looks at an
// upstream like a token taken early: checks on arrival times allow the
// lateness the probe saw near them, and nothing more. Its methods are safe
// for concurrent use; a nil Probe has seen nothing.
type Probe struct {
	start time.Time
	stop  chan struct{}
	done  chan struct{}

	mu    sync.Mutex
	from  int             // the first second Worst counts (Reset)
	worst []time.Duration // by second since start
}

// Tick is how long the probe sleeps between looks at the clock.
const Tick = 2 * time.Millisecond

// Start starts a probe; Stop ends it.
func Start() *Probe {
	p := &Probe{start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *Probe) run() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		default:
		}
		t := time.Now()
		time.Sleep(Tick)
		late := time.Since(t) - Tick
		sec := int(t.Sub(p.start) / time.Second)
		p.mu.Lock()
		for len(p.worst) <= sec {
			p.worst = append(p.worst, 0)
		}
		p.worst[sec] = max(p.worst[sec], late)
		p.mu.Unlock()
	}
}

// Stop ends the probe and returns once its goroutine has.
func (p *Probe) Stop() {
	close(p.stop)
	<-p.done
}

// Reset forgets what the probe has seen so far, for Worst: a test calls it
// when the part it measures begins, so that starting processes does not
// count.
func (p *Probe) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.from = int(time.Since(p.start) / time.Second)
	for s := p.from; s < len(p.worst); s++ {
		p.worst[s] = 0
	}
}

// Worst is the worst lateness seen since the probe started or was last Reset.
func (p *Probe) Worst() time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.worstIn(p.from, len(p.worst)-1)
}

// WorstIn is the worst lateness seen in the seconds from from to to.
func (p *Probe) WorstIn(from, to time.Time) time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.worstIn(int(from.Sub(p.start)/time.Second), int(to.Sub(p.start)/time.Second))
}

func (p *Probe) worstIn(lo, hi int) time.Duration {
	var w time.Duration
	for s := max(lo, 0); s <= hi && s < len(p.worst); s++ {
		w = max(w, p.worst[s])
	}
	return w
}
