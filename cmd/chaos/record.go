package main

import (
	"sync"
	"time"
)

// record is what the run saw happen, as it happened: the inputs of the
// checks beside the upstream's log and the queue. Its methods are safe for
// concurrent use.
type record struct {
	mu        sync.Mutex
	kills     []kill
	outages   []span        // Redis paused or down
	msgLosses []time.Time   // a pub/sub message may have been lost here
	limits    []limitChange // sluice set / unset, in the order they ran
	cooldowns []cooldown    // sluice cooldown
	problems  []string      // faults that could not be applied
	events    []eventLine   // what the run printed as it went, for the report
}

// kill is a worker killed with SIGKILL.
type kill struct {
	Worker string
	Pid    int
	At     time.Time
	// Conns are the ids of the connections to the upstream the worker had
	// open when it died: a request that came on one of them was its own.
	// Known is false where they cannot be seen (no /proc).
	Conns []int64
	Known bool
}

// span is a stretch of time.
type span struct{ From, To time.Time }

// limitChange is a runtime limit set (or unset: Bounds are the workers'
// own) by the sluice command, which ran from Start to End.
type limitChange struct {
	Start, End time.Time
	Bounds     bounds
	Failed     bool // the command failed: the change may or may not have been made
}

// cooldown is a `sluice cooldown` of one tenant's bucket for For, by a
// command that ran from Start to End.
type cooldown struct {
	Start, End time.Time
	For        time.Duration
	Tenant     string
}

// eventLine is one line the run printed about a fault.
type eventLine struct {
	At   time.Time
	Text string
}

func (r *record) add(f func(r *record)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}
