package throttle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// The conformance table: every case runs, step by step at fixed instants,
// against the memory store and against a real redis-server (with the same
// explicit clock passed to the scripts), and both must give the same answers.

var (
	tenPerSec = Limit{Rate: 10, Burst: 5}                       // T = 100 ms
	onePerSec = Limit{Rate: 1, Period: time.Second, Burst: 1}   // T = 1 s
	threePS   = Limit{Rate: 3, Period: time.Second, Burst: 1}   // T = 333333.333334 µs
	tenBurst  = Limit{Rate: 10, Period: time.Second, Burst: 10} // T = 100 ms
	perMinute = Limit{Rate: 2, Period: time.Minute, Burst: 2}   // T = 30 s
)

type op int

const (
	opTake         op = iota // reserve, no bound on the wait
	opTry                    // reserve with maxWait (0 = TryAcquire)
	opCancel                 // refund reservation #ref with id "id-<ref>"
	opCooldown               // cooldown the first bucket for d
	opCooldownLeft           // how much of the first bucket's cooldown is left: next
)

type step struct {
	at      int64 // µs after base
	op      op
	buckets []Bucket
	maxWait int64
	ref     int // opCancel: index of the step whose reservation to refund
	d       time.Duration
	// pol, key and n: a one-key call under a policy other than Limit (buckets unused).
	pol algo
	key string
	n   int

	granted   bool
	wait      int64
	remaining int
	reset     int64
	refunded  bool
	next      time.Duration
}

func b(key string, l Limit, n int) []Bucket { return []Bucket{{Key: key, Limit: l, N: n}} }

// confCase is one case of the conformance table. Each policy's test file adds
// its own cases to the table (an init func appending to conformance).
type confCase struct {
	name  string
	steps []step
}

var conformance = []confCase{
	{"burst then pace", []step{
		{at: 0, op: opTry, buckets: b("k", tenPerSec, 1), granted: true, remaining: 4, reset: 100000},
		{at: 0, op: opTry, buckets: b("k", tenPerSec, 4), granted: true, remaining: 0, reset: 500000},
		{at: 0, op: opTry, buckets: b("k", tenPerSec, 1), granted: false, wait: 100000, remaining: 0, reset: 500000},
		{at: 50000, op: opTry, buckets: b("k", tenPerSec, 1), granted: false, wait: 50000, remaining: 0, reset: 450000},
		{at: 100000, op: opTry, buckets: b("k", tenPerSec, 1), granted: true, remaining: 0, reset: 500000},
		{at: 1100000, op: opTry, buckets: b("k", tenPerSec, 2), granted: true, remaining: 3, reset: 200000},
	}},
	{"reservations line up in arrival order", []step{
		{at: 0, op: opTake, buckets: b("k", tenPerSec, 5), granted: true, remaining: 0, reset: 500000},
		{at: 0, op: opTake, buckets: b("k", tenPerSec, 1), granted: true, wait: 100000, remaining: 0, reset: 600000},
		{at: 0, op: opTake, buckets: b("k", tenPerSec, 1), granted: true, wait: 200000, remaining: 0, reset: 700000},
		{at: 0, op: opTry, maxWait: 250000, buckets: b("k", tenPerSec, 2), granted: false, wait: 400000, remaining: 0, reset: 700000},
		{at: 0, op: opTry, maxWait: 300000, buckets: b("k", tenPerSec, 1), granted: true, wait: 300000, remaining: 0, reset: 800000},
	}},
	{"cancel of the last reservation gives its slot back", []step{
		{at: 0, op: opTake, buckets: b("k", tenPerSec, 5), granted: true, remaining: 0, reset: 500000},
		{at: 0, op: opTake, buckets: b("k", tenPerSec, 1), granted: true, wait: 100000, remaining: 0, reset: 600000},
		{at: 10000, op: opCancel, ref: 1, refunded: true},
		{at: 10000, op: opTake, buckets: b("k", tenPerSec, 1), granted: true, wait: 90000, remaining: 0, reset: 590000},
	}},
	{"a cancel under a later reservation leaves its turn to the next caller", []step{
		{at: 0, op: opTake, buckets: b("k", tenPerSec, 5), granted: true, remaining: 0, reset: 500000},
		{at: 0, op: opTake, buckets: b("k", tenPerSec, 1), granted: true, wait: 100000, remaining: 0, reset: 600000},
		{at: 0, op: opTake, buckets: b("k", tenPerSec, 1), granted: true, wait: 200000, remaining: 0, reset: 700000},
		{at: 10000, op: opCancel, ref: 1, refunded: true},
		// The cancelled turn at 100 ms is a hole: the next caller has it.
		{at: 10000, op: opTake, buckets: b("k", tenPerSec, 1), granted: true, wait: 90000, remaining: 0, reset: 690000},
		{at: 10000, op: opTake, buckets: b("k", tenPerSec, 1), granted: true, wait: 290000, remaining: 0, reset: 790000},
		// The one that took the hole cancels: its turn is a hole again.
		{at: 20000, op: opCancel, ref: 4, refunded: true},
		{at: 20000, op: opTry, buckets: b("k", tenPerSec, 1), maxWait: 80000, granted: true, wait: 80000, remaining: 0, reset: 780000},
	}},
	// Issue #9's case: an exhausted 10/s bucket of burst 10, five bookings
	// cancelled oldest first, all at once, or in no order: the next caller
	// waits 100 ms, as if they had never been made.
	{"five cancels oldest first give every turn back", cancelsInOrder(1, 2, 3, 4, 5)},
	{"five cancels newest first give every turn back", cancelsInOrder(5, 4, 3, 2, 1)},
	{"five cancels in no order give every turn back", cancelsInOrder(3, 1, 5, 2, 4)},
	{"a refund is applied at most once", []step{
		{at: 0, op: opTake, buckets: b("k", tenPerSec, 5), granted: true, remaining: 0, reset: 500000},
		{at: 0, op: opTake, buckets: b("k", tenPerSec, 2), granted: true, wait: 200000, remaining: 0, reset: 700000},
		{at: 1000, op: opCancel, ref: 1, refunded: true},
		{at: 2000, op: opCancel, ref: 1, refunded: false},
		{at: 2000, op: opTry, buckets: b("k", tenPerSec, 1), granted: false, wait: 98000, remaining: 0, reset: 498000},
	}},
	{"cancel after the slot gives nothing back", []step{
		{at: 0, op: opTake, buckets: b("k", tenPerSec, 5), granted: true, remaining: 0, reset: 500000},
		{at: 0, op: opTake, buckets: b("k", tenPerSec, 1), granted: true, wait: 100000, remaining: 0, reset: 600000},
		{at: 100000, op: opCancel, ref: 1, refunded: false},
		{at: 100000, op: opTake, buckets: b("k", tenPerSec, 1), granted: true, wait: 100000, remaining: 0, reset: 600000},
	}},
	{"cooldown holds every caller, then resumes one token at a time", []step{
		{at: 0, op: opCooldown, buckets: b("k", tenPerSec, 1), d: 2 * time.Second, next: 2 * time.Second},
		{at: 0, op: opCooldown, buckets: b("k", tenPerSec, 1), d: time.Second, next: 2 * time.Second},
		{at: 1000000, op: opCooldownLeft, buckets: b("k", tenPerSec, 1), next: time.Second},
		{at: 1000000, op: opCooldownLeft, buckets: b("other", tenPerSec, 1), next: 0},
		{at: 1000000, op: opTry, buckets: b("k", tenPerSec, 1), granted: false, wait: 1000000, remaining: 0, reset: 1400000},
		{at: 2000000, op: opCooldownLeft, buckets: b("k", tenPerSec, 1), next: 0},
		{at: 2000000, op: opTry, buckets: b("k", tenPerSec, 1), granted: true, remaining: 0, reset: 500000},
		{at: 2000000, op: opTry, buckets: b("k", tenPerSec, 1), granted: false, wait: 100000, remaining: 0, reset: 500000},
	}},
	{"a changed limit applies on the next call", []step{
		{at: 0, op: opTry, buckets: b("k", tenPerSec, 5), granted: true, remaining: 0, reset: 500000},
		{at: 0, op: opTry, buckets: b("k", tenBurst, 1), granted: true, remaining: 4, reset: 600000},
		{at: 0, op: opTry, buckets: b("k", onePerSec, 1), granted: false, wait: 600000, remaining: 0, reset: 600000},
	}},
	{"several buckets: all or nothing, the longest wait", []step{
		{at: 0, op: opTry, buckets: []Bucket{{Key: "{a}:t1", Limit: onePerSec, N: 1}, {Key: "{a}:g", Limit: tenBurst, N: 1}}, granted: true, remaining: 0, reset: 1000000},
		{at: 0, op: opTry, buckets: []Bucket{{Key: "{a}:t1", Limit: onePerSec, N: 1}, {Key: "{a}:g", Limit: tenBurst, N: 1}}, granted: false, wait: 1000000, remaining: 0, reset: 1000000},
		{at: 0, op: opTry, buckets: b("{a}:g", tenBurst, 1), granted: true, remaining: 8, reset: 200000},
		{at: 0, op: opTake, buckets: []Bucket{{Key: "{a}:t1", Limit: onePerSec, N: 1}, {Key: "{a}:g", Limit: tenBurst, N: 1}}, granted: true, wait: 1000000, remaining: 0, reset: 2000000},
		{at: 500000, op: opCancel, ref: 3, refunded: true},
		{at: 500000, op: opTry, buckets: b("{a}:g", tenBurst, 1), granted: true, remaining: 9, reset: 100000},
		{at: 500000, op: opTry, buckets: b("{a}:t1", onePerSec, 1), granted: false, wait: 500000, remaining: 0, reset: 500000},
	}},
	{"each bucket counts a multi-bucket grant at its slot; a refund restores it", []step{
		// The slot of a two-bucket reservation follows the slow global
		// bucket: the tenant bucket counts its 3 tokens at that slot, 30 s
		// on, so the tenant cannot act more often than its limit at the
		// time it acts.
		{at: 0, op: opTry, buckets: b("{a}:g", perMinute, 2), granted: true, remaining: 0, reset: 60000000},
		{at: 0, op: opTake, buckets: []Bucket{{Key: "{a}:t", Limit: tenPerSec, N: 3}, {Key: "{a}:g", Limit: perMinute, N: 1}}, granted: true, wait: 30000000, remaining: 0, reset: 90000000},
		{at: 350000, op: opTry, buckets: b("{a}:t", tenPerSec, 1), granted: false, wait: 29550000, remaining: 0, reset: 29950000},
		{at: 350000, op: opCancel, ref: 1, refunded: true},
		{at: 350000, op: opTry, buckets: b("{a}:t", tenPerSec, 5), granted: true, remaining: 0, reset: 500000},
		{at: 350000, op: opTry, buckets: b("{a}:t", tenPerSec, 4), granted: false, wait: 400000, remaining: 0, reset: 500000},
		{at: 350000, op: opTry, buckets: b("{a}:g", perMinute, 1), granted: false, wait: 29650000, remaining: 0, reset: 59650000},
	}},
	{"fractional interval", []step{
		{at: 0, op: opTry, buckets: b("k", threePS, 1), granted: true, remaining: 0, reset: 333334},
		{at: 333000, op: opTry, buckets: b("k", threePS, 1), granted: false, wait: 334, remaining: 0, reset: 334},
		{at: 333334, op: opTry, buckets: b("k", threePS, 1), granted: true, remaining: 0, reset: 333334},
	}},
	{"slow limits and long idle", []step{
		{at: 0, op: opTry, buckets: b("k", perMinute, 2), granted: true, remaining: 0, reset: 60000000},
		{at: 0, op: opTry, buckets: b("k", perMinute, 1), granted: false, wait: 30000000, remaining: 0, reset: 60000000},
		{at: 10 * 365 * 24 * 3600 * 1000000, op: opTry, buckets: b("k", perMinute, 1), granted: true, remaining: 1, reset: 30000000},
	}},
}

// cancelsInOrder is issue #9's case: a 10/s bucket of burst 10, exhausted,
// five one-token bookings (steps 1–5, 100 ms apart), cancelled in order
// (1 the oldest), then the next caller.
func cancelsInOrder(order ...int) []step {
	tenTen := Limit{Rate: 10, Burst: 10}
	steps := []step{{at: 0, op: opTake, buckets: b("k", tenTen, 10), granted: true, remaining: 0, reset: 1000000}}
	for i := 1; i <= 5; i++ {
		steps = append(steps, step{at: 0, op: opTake, buckets: b("k", tenTen, 1), granted: true, wait: int64(i) * 100000, remaining: 0, reset: 1000000 + int64(i)*100000})
	}
	for _, ref := range order {
		steps = append(steps, step{at: 10000, op: opCancel, ref: ref, refunded: true})
	}
	return append(steps,
		step{at: 10000, op: opTake, buckets: b("k", tenTen, 1), granted: true, wait: 90000, remaining: 0, reset: 1090000},
		step{at: 10000, op: opTake, buckets: b("k", tenTen, 1), granted: true, wait: 190000, remaining: 0, reset: 1190000})
}

// runConformance drives store through every case; prefix isolates cases.
func runConformance(t *testing.T, newStore func(clock) Store, prefix string) {
	for ci, c := range conformance {
		t.Run(c.name, func(t *testing.T) {
			clock := newFakeClock()
			store := newStore(clock)
			pfx := fmt.Sprintf("%sc%d:", prefix, ci)
			ctx := context.Background()
			reqs := make([]request, len(c.steps))
			decs := make([]decision, len(c.steps))
			for i, s := range c.steps {
				clock.at(s.at)
				msg := fmt.Sprintf("step %d", i)
				switch s.op {
				case opTake, opTry:
					var req request
					if s.pol != nil {
						req = request{prefix: pfx, one: Bucket{Key: s.key, Limit: s.pol, N: s.n}, maxWait: s.maxWait}
					} else {
						req = request{prefix: pfx, one: s.buckets[0], maxWait: s.maxWait}
						if len(s.buckets) > 1 {
							req.more = s.buckets[1:]
						}
					}
					if s.op == opTake {
						req.maxWait = -1
					}
					d, err := store.reserve(ctx, req)
					require.NoError(t, err, msg)
					assert.Equal(t, s.granted, d.granted, msg+" granted")
					assert.Equal(t, s.wait, d.wait, msg+" wait")
					assert.Equal(t, s.remaining, d.remaining, msg+" remaining")
					assert.Equal(t, s.reset, d.reset, msg+" reset")
					assert.Equal(t, base.UnixMicro()+s.at, d.now, msg+" now")
					reqs[i], decs[i] = req, d
				case opCancel:
					ok, err := store.refund(ctx, reqs[s.ref], decs[s.ref], fmt.Sprintf("id-%d", s.ref))
					require.NoError(t, err, msg)
					assert.Equal(t, s.refunded, ok, msg+" refunded")
				case opCooldown:
					next, err := store.cooldown(ctx, pfx, s.buckets[0], s.d)
					require.NoError(t, err, msg)
					assert.Equal(t, s.next, next, msg+" next")
				case opCooldownLeft:
					left, err := store.cooldownLeft(ctx, pfx, s.buckets[0].Key)
					require.NoError(t, err, msg)
					assert.Equal(t, s.next, left, msg+" left")
				}
			}
		})
	}
}

func TestConformanceMemory(t *testing.T) {
	runConformance(t, func(c clock) Store { return NewMemoryStore(WithClock(c)) }, "")
}

func TestConformanceRedis(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	// persisting: the keys of fast buckets live a millisecond, real time, where the
	// fake clock moves by microseconds.
	runConformance(t, func(c clock) Store { return NewRedisStore(persisting{rdb}, WithClock(c)) }, redistest.Prefix(t))
}
