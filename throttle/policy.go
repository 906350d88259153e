package throttle

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Policy is a rate-limiting algorithm with its parameters: what Acquire,
// TryAcquire and Reserve enforce on a key. Pick one for the promise it keeps:
//
//   - Limit, a token bucket: Rate per Period on average, bursts up to Burst;
//   - FixedWindow: at most Max per aligned window ("100 per calendar minute");
//   - SlidingLog: at most Max in any span of Window, exact;
//   - SlidingWindow: about Max in any span of Window, in constant memory;
//   - LeakyBucket: an even pace, one every Period/Rate, at most Capacity queued.
//
// Every policy is kept in Redis by one atomic script per call, on the server's
// clock, and in memory by the same arithmetic; every blocking wait is computed
// from the key's state, never polled. The set is closed: only this package's
// types implement Policy. A distributed semaphore, "at most Max in flight", is
// Concurrency, used through Limiter.Hold.
type Policy interface {
	// Validate reports why the policy cannot be used, or nil.
	Validate() error
	// Quota is the most the policy grants at once (Burst, Max or Capacity) and
	// the time it takes for that much to come back after it was all taken: the
	// figures an HTTP RateLimit-Policy header states.
	Quota() (max int, window time.Duration)
	String() string

	isPolicy()
}

func (Limit) isPolicy() {}

// Quota is Burst tokens, and the time an empty bucket takes to refill them.
func (l Limit) Quota() (int, time.Duration) {
	return l.Burst, micros(int64(l.Burst) * l.interval())
}

// algo is a Policy other than Limit: one key per call, its own state and
// scripts. The Limiter validates with check; the stores run the rest.
//
// Every algo's Redis scripts follow one contract, so RedisStore runs them all
// the same way (redis_algo.go):
//
//	reserve: KEYS[1] state key
//	         ARGV[1] now µs or "" for Redis TIME, ARGV[2] max wait µs (-1: none),
//	         ARGV[3] n, ARGV[4..] args()
//	         reply {granted, wait µs, remaining, reset µs, now µs, handle}
//	         (handle ≥ 0, 0 when denied: what a refund needs)
//	refund:  KEYS[1] state key, KEYS[2] marker key (its presence: already refunded)
//	         ARGV[1] now µs or "", ARGV[2] the reservation's slot µs, ARGV[3] n,
//	         ARGV[4] handle, ARGV[5..] args()
//	         reply 1 if processed now, 0 if the slot has passed or it was processed before
//
// Every script starts with now.lua (newScript), which sets `now`; a refund
// script also with refund_guard.lua (newRefundScript), which returns 0 past the
// slot or on a second try, so the algo's refund body only gives back. The
// memory side mirrors them on a per-key state value that the algo owns, and
// MemoryStore keeps the markers.
type algo interface {
	Policy
	// check validates the policy and a request for n of it; an n that could
	// never be granted is an InvalidError matching ErrTooLarge.
	check(n int) error
	// kind names the algorithm in its state key, e.g. "fw": keys of different
	// algorithms never collide, even under one name.
	kind() string
	// args are the policy's parameters as its scripts read them, after the common ARGV.
	args() []any
	scripts() (reserve, refund *redis.Script)

	// reserveMem is the reserve script on *st, the key's state: nil when the
	// key is new; the algo may set it, or set it to nil to forget the key.
	reserveMem(st *memState, now int64, n int, maxWait int64) decision
	// refundMem is the refund script without the marker: the store keeps that.
	refundMem(st *memState, now int64, n int, d decision)
	// share is the policy cut to one host's share among hosts (FailLocal).
	share(hosts int) algo
}

// policyRequest is a one-key request for n of p.
func policyRequest(key string, p Policy, n int) (request, error) {
	switch p := p.(type) {
	case Limit:
		return request{one: Bucket{Key: key, Limit: p, N: n}}, nil
	case FixedWindow, SlidingLog, SlidingWindow, LeakyBucket:
		// Values only: a pointer has their methods too, and a nil one panics in them.
		return request{one: Bucket{Key: key, N: n}, pol: p.(algo)}, nil
	case nil:
		return request{one: Bucket{Key: key, N: n}}, invalidf("policy is nil")
	}
	return request{one: Bucket{Key: key, N: n}}, invalidf("policy %T is not one of this package's", p)
}

// algoKey is the state key of an algo's bucket name under prefix.
func algoKey(prefix, name string, a algo) string { return redisKey(prefix, name) + ":" + a.kind() }

// memState is one key's state in a MemoryStore, under an algo.
type memState interface {
	// idleAt reports that the state holds nothing that matters at now or
	// later (the Redis key would have expired), so the key can be forgotten.
	idleAt(now int64) bool
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
		return &InvalidError{Reason: fmt.Sprintf("n %d is larger than %s %d: it could never be granted", n, what, limit), tooLarge: true}
	}
	return nil
}
