package throttle

import (
	"fmt"
	"time"
)

// Policy is a rate-limiting algorithm with its parameters: what Acquire,
// TryAcquire and Reserve enforce on a key. Pick one for the promise it keeps:
//
//   - Limit, a token bucket: Rate per Period on average, bursts up to Burst;
//   - FixedWindow: at most Max per aligned window ("100 per calendar minute"),
//     or per day, week or month of a time zone ("2,000 a day, Pacific time");
//   - SlidingLog: at most Max in any span of Window, exact;
//   - SlidingWindow: about Max in any span of Window, in constant memory;
//   - LeakyBucket: an even pace, one every Period/Rate, at most Capacity queued.
//
// Every policy is kept in Redis by one atomic script per call, on the server's
// clock, and in memory by the same arithmetic; every blocking wait is computed
// from the key's state, never polled. The set is closed: only this package's
// types implement Policy. A distributed semaphore, "at most Max in flight", is
// Concurrency, used through Limiter.Hold.
//
// Validate checks a policy before any call; QuotaOf states its figures.
type Policy interface {
	String() string

	validate() error
	quota() (max int, window time.Duration)
	isPolicy()
}

// Validate reports why p cannot be used, or nil: what Acquire, TryAcquire
// and Reserve would return for it, checked before any call. The error
// matches ErrInvalid.
func Validate(p Policy) error {
	a, err := asAlgo(p)
	if err != nil {
		return err
	}
	return a.validate()
}

// QuotaOf is the most p grants at once (a Limit's Burst, a window's Max, a
// leaky bucket's Capacity) and the time it takes for that much to come back
// after it was all taken: the figures an HTTP RateLimit-Policy header
// states. An Adaptive policy's are its ceiling's. A nil p has none.
func QuotaOf(p Policy) (n int, span time.Duration) {
	a, err := asAlgo(p)
	if err != nil {
		return 0, 0
	}
	return a.quota()
}

func (Limit) isPolicy() {}

// quota is Burst tokens, and the time an empty bucket takes to refill them.
func (l Limit) quota() (int, time.Duration) {
	return l.Burst, micros(l.pace().times(int64(l.Burst)).ceil())
}

// algo is what every Policy is inside this package: its checks, its
// parameters as the scripts read them, and its state on a memory store.
//
// Every algo's Redis side is a Lua module (lua/<kind>.lua) that the bucket
// scripts dispatch to, so one script call serves buckets of any mix of
// policies (scripts.go): load the key's state; tail, the earliest time at or
// after now at which n fit behind what is booked (or a refusal, for a queue
// that is full); commit n at a slot at or after that; figures (remaining,
// reset); the rollback of the latest booking; release, what a hole nobody
// took gives back; hold, for a cooldown; holetill, how long a cancelled turn
// may be moved. The memory side mirrors each module as a module value
// (open), on a per-key state the algo owns; both are held to the conformance
// table and the lockstep random tests.
type algo interface {
	Policy
	// check validates the policy and a request for n of it; an n that could
	// never be granted is an invalidError matching ErrTooLarge.
	check(n int) error
	// kind names the algorithm's Lua module and its state key's suffix.
	kind() kind
	// args are the policy's parameters as its module reads them (a1, a2,
	// a3, a4; a token or leaky bucket's T is a1 µs and a4 picoseconds).
	args() [4]int64
	// share is the policy cut to one host's share among hosts (FailLocal).
	share(hosts int) algo
	// open binds the key's state (nil: none) to the policy for one call at
	// now; cool is the end of the key's cooldown (0: none).
	open(st memState, now, cool int64) module
}

// kind is an algorithm: the name of its Lua module and its state key's suffix.
type kind int

const (
	kindTB kind = iota // Limit, the token bucket: the state is the bucket's own key
	kindLB             // LeakyBucket
	kindFW             // FixedWindow
	kindSL             // SlidingLog
	kindSW             // SlidingWindow
	kindCW             // FixedWindow with a Calendar unit
	numKinds
)

var kindNames = [numKinds]string{"tb", "lb", "fw", "sl", "sw", "cw"}

func (k kind) String() string { return kindNames[k] }

// asAlgo is p as this package runs it: one of its policy values, or a
// non-nil pointer to one.
func asAlgo(p Policy) (algo, error) {
	switch p.(type) {
	case Limit, FixedWindow, SlidingLog, SlidingWindow, LeakyBucket, Adaptive:
		return p.(algo), nil // the same value, no copy
	case foreign:
		return nil, p.(foreign).err()
	case nil:
		return nil, invalidf("policy is nil")
	}
	// Pointers have the values' methods too; a nil one would panic in them.
	switch p := p.(type) {
	case *Limit:
		if p != nil {
			return *p, nil
		}
	case *FixedWindow:
		if p != nil {
			return *p, nil
		}
	case *SlidingLog:
		if p != nil {
			return *p, nil
		}
	case *SlidingWindow:
		if p != nil {
			return *p, nil
		}
	case *LeakyBucket:
		if p != nil {
			return *p, nil
		}
	case *Adaptive:
		if p != nil {
			return *p, nil
		}
	default:
		return nil, invalidf("policy %T is not one of this package's", p)
	}
	return nil, invalidf("policy %T is nil", p)
}

// stateKey is the Redis key of bucket name's state under a: the bucket's own
// key for a token bucket (as it has always been), else that plus ":<kind>",
// so keys of different algorithms never collide and the name's hash tag, and
// with it the Cluster slot, is kept.
func stateKey(prefix, name string, a algo) string {
	if a.kind() == kindTB {
		return redisKey(prefix, name)
	}
	return redisKey(prefix, name) + ":" + a.kind().String()
}

// memState is one key's state in a memory store, under an algo.
type memState interface {
	// idleAt reports that the state holds nothing that matters at now or
	// later (the Redis key would have expired), so the key can be forgotten.
	idleAt(now int64) bool
}

// module is a policy's state on one key of a memory store, bound to the
// policy of one call: the twin of the policy's Lua module (see algo).
//
// A handle is what a refund of a booking needs: a token or leaky bucket's
// TAT before it (a pico), a window's index or a log entry's time (in us).
type module interface {
	tail(now int64, n int, maxWait int64) (e int64, ok bool, retry int64)
	commit(now, s int64, n int) (handle pico)
	figures(now int64) (remaining int, reset int64)
	isTail(handle pico, slot int64, n int) bool
	has(now int64, handle pico) bool
	rollback(now int64, n int, handle pico, hs *holes)
	release(now int64, n int, handle pico)
	// settle charges the booking with this handle at slot, which took n,
	// what it really used (lua/settle.lua and the modules' settle).
	settle(now int64, n, used int, handle pico, slot int64, hs *holes)
	hold(now, till int64)
	holeTill(at int64) int64
	// fromHole is the handle of a grant of n served from hole h, which it
	// moves on to where what is left of it starts: a window's grant has
	// none (0), a token or leaky bucket's is the turn's instant, and a leaky
	// bucket's turns never coincide, so the rest of its hole starts n·T
	// later.
	fromHole(h *hole, n int) pico
	// flag is called when the key's holes come or go, where the Lua module's
	// flag writes its state (a module whose state records that writes it).
	flag()
	// save is the key's state after the call, and whether the call wrote it:
	// if not, the key keeps the state it had, as the Redis key does.
	save() (memState, bool)
}

// checkMax checks a window policy's Max.
func checkMax(m int) error {
	switch {
	case m < 1:
		return invalidf("max %d must be at least 1", m)
	case m > maxBurst:
		return invalidf("max %d is larger than %d", m, maxBurst)
	}
	return nil
}

// checkWindow checks a window policy's Window: whole microseconds, from
// minWindow to the span a key's state may reach.
func checkWindow(w time.Duration) error {
	switch {
	case w < minWindow:
		return invalidf("window %v must be at least %v", w, minWindow)
	case w%time.Microsecond != 0:
		return invalidf("window %v must be a whole number of microseconds", w)
	case w/time.Microsecond > maxSpan:
		return invalidf("window %v is longer than %v", w, micros(maxSpan))
	}
	return nil
}

// checkN checks a request for n of a policy that grants at most limit at
// once; what names the limit ("max", "capacity").
func checkN(n, limit int, what string) error {
	if n < 1 {
		return invalidf("n %d must be at least 1", n)
	}
	if n > limit {
		return &invalidError{reason: fmt.Sprintf("n %d is larger than %s %d: it could never be granted", n, what, limit), tooLarge: true}
	}
	return nil
}
