// Package throttle shares rate limits across processes through Redis, with a blocking, exact Acquire.
//
// A [Limiter] takes tokens from named buckets kept in a [Store]: a [RedisStore]
// shared by a fleet, or a [MemoryStore] inside one process. Each bucket is a
// token bucket (the generic cell rate algorithm: one timestamp per bucket) whose
// state lives in the store and whose time comes from the store: Redis TIME, never
// a client clock.
//
// A caller that cannot be served at once reserves its tokens and is told exactly
// when its slot comes: Acquire sleeps until then, in arrival order, with one store
// round trip per grant and no polling. If the caller's context ends first the
// tokens go back. See docs/throttle-design.md for the state machine and the Lua
// replies.
package throttle
