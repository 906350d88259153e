// Package throttle shares rate limits across processes through Redis, with a blocking, exact Acquire.
//
// A [Limiter] enforces a [Policy] on named keys kept in a [Store]: a [RedisStore]
// shared by a fleet, or one from [NewMemoryStore] inside one process. The
// policy is the promise a caller wants kept:
//
//   - [Limit], a token bucket (the generic cell rate algorithm: one timestamp
//     per key): Rate per Period on average, bursts up to Burst;
//   - [FixedWindow]: at most Max per aligned window, or per calendar day,
//     week or month in a time zone (a quota "2,000 a day, Pacific time");
//   - [SlidingLog]: at most Max in any span of Window, exactly;
//   - [SlidingWindow]: the same within a documented error, in constant memory;
//   - [LeakyBucket]: an even pace, with at most Capacity queued;
//   - [Concurrency], through [Limiter.Hold]: at most Max holders at once, each
//     on a lease that expires if its process dies.
//
// State lives in the store and time comes from the store: Redis TIME, never a
// client clock. A caller that cannot be served at once reserves its place and
// is told exactly when its slot comes: Acquire sleeps until then, in arrival
// order, with one store round trip per grant and no polling. If the caller's
// context ends first, what it took goes back where the policy allows. See
// docs/throttle-design.md for the state machines and the Lua replies.
//
// A job whose cost is known only after it ran (an LLM call books its
// max_tokens, its answer says how many it used) takes a [Reservation] with
// [Limiter.Reserve] or [Limiter.ReserveAll] and settles each bucket it
// learns the cost of with [Reservation.Settle]: what it did not use goes
// back to the bucket for the next callers at once, as far as the policy's
// promise allows, and what it used beyond its estimate is a debt the next
// grants wait for.
//
// A Limiter calls its store through layers its options choose once, in
// [NewLimiter]: the failure policy ([FailClosed], [FailOpen], [FailLocal])
// next to the store, and over a RedisStore the coalescing of concurrent
// calls (unless [WithoutCoalescing]) and [WithPrefetch].
//
// A [Limit] or [LeakyBucket] keeps its rate exactly, from one token a year to
// 10⁹ a second (a byte rate: 125,000,000 a second is a gigabit): its time
// per token and its state are kept to the picosecond, on Redis and in
// memory alike. Slots are whole microseconds, each the instant the bucket
// booked rounded up, so a grant acts at most 1 µs after that instant and
// never before it.
package throttle
