package main

import (
	"sync"
	"time"
)

// jitterProbe measures how late this machine wakes a goroutine that asked
// to: it sleeps probeTick over and over and keeps the worst overshoot of
// each second of the run. A worker's timer, the upstream's handler and the
// loopback are late by as much, and a request that arrives late, followed
// by others on time, looks at the upstream like a token taken early: the
// grant check allows, near each arrival, the lateness the probe saw there.
type jitterProbe struct {
	start time.Time
	stop  chan struct{}
	done  chan struct{}

	mu    sync.Mutex
	worst []time.Duration // by second since start
}

const probeTick = 2 * time.Millisecond

func startJitterProbe() *jitterProbe {
	p := &jitterProbe{start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
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
		t := time.Now()
		time.Sleep(probeTick)
		late := time.Since(t) - probeTick
		sec := int(t.Sub(p.start) / time.Second)
		p.mu.Lock()
		for len(p.worst) <= sec {
			p.worst = append(p.worst, 0)
		}
		p.worst[sec] = max(p.worst[sec], late)
		p.mu.Unlock()
	}
}

// Stop ends the probe.
func (p *jitterProbe) Stop() {
	close(p.stop)
	<-p.done
}

// Worst is the worst lateness seen in [from, to].
func (p *jitterProbe) Worst(from, to time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	lo, hi := int(from.Sub(p.start)/time.Second), int(to.Sub(p.start)/time.Second)
	var w time.Duration
	for s := max(lo, 0); s <= hi && s < len(p.worst); s++ {
		w = max(w, p.worst[s])
	}
	return w
}
