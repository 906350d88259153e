package throttle

import (
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures a Limiter.
type Option func(*config)

type config struct {
	prefix         string
	meterProvider  metric.MeterProvider
	tracerProvider trace.TracerProvider
	failure        FailurePolicy
	refundTimeout  time.Duration
	label          func(key string) string
	noCoalescing   bool
	prefetch       int

	// FailLocal (see fallback.go)
	hosts         func() int
	probeInterval time.Duration
	onModeChange  func(mode string, err error)
	clock         clock // mode timing and the local bucket; nil: the real clock
}

// defaultProbeInterval is how long FailLocal serves calls locally before it
// asks the store again.
const defaultProbeInterval = time.Second

func newConfig(opts []Option) config {
	c := config{prefix: DefaultKeyPrefix, refundTimeout: defaultRefundTimeout, probeInterval: defaultProbeInterval}
	for _, o := range opts {
		o(&c)
	}
	if c.meterProvider == nil {
		c.meterProvider = otel.GetMeterProvider()
	}
	if c.tracerProvider == nil {
		c.tracerProvider = otel.GetTracerProvider()
	}
	return c
}

// WithKeyPrefix sets the prefix of every bucket's store key (default "sluice:").
// Limiters that share a store but not a prefix never share a bucket. The prefix
// may not contain '{' or '}'; an invalid one makes every call fail with ErrInvalid.
func WithKeyPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

// WithoutCoalescing makes every call of the Limiter a store call of its own.
// By default, calls to a RedisStore that take the same buckets (same keys,
// policies and n, no Share) while one of them is out share round trips:
// the calls queued behind it go together in one script call, each decided
// as if alone (see docs/benchmarks.md). A memory store never coalesces.
func WithoutCoalescing() Option {
	return func(c *config) { c.noCoalescing = true }
}

// WithPrefetch makes each one-bucket call to a RedisStore book, in the same
// script call, up to n more grants of the same bucket that it can make at
// once, for the calls of this process that follow while the grants are
// fresh to take without a round trip (n from 1 to 255; 0, the default, is
// off). A grant stays fresh for a 64th of the time its bucket takes to give
// back all it grants at once (QuotaOf), from 1 ms to 20 ms. It suits a
// worker pool whose limits seldom bind: its rate with a limit that never
// denies is that of a pool without the round trip (docs/benchmarks.md).
// Its cost is fairness: while booked grants wait in this process no other
// process can have them (it books extras only from the upper half of the
// bucket, as its last booking left it: near its limit a bucket is booked
// one call at a time); those not taken while fresh are given back (one
// more script call, by a timer, or by the next call if it comes first)
// unless another booking already stands on them, in which case they are
// lost to every process; and the caller that takes one acts up to its
// freshness after the instant it was booked at: over any span, up to a
// 64th of the burst more than the policy's bound, or a millisecond's worth
// where that is more (see prefetch.go). One-bucket calls then go to the
// store alone, not coalesced; a bucket that cannot grant at once books no
// extra, nor does a bucket called less often than its freshness.
func WithPrefetch(n int) Option {
	return func(c *config) { c.prefetch = min(max(n, 0), maxBatch-1) }
}

// WithMeterProvider sets where metrics go (default: the global MeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meterProvider = mp }
}

// WithTracerProvider sets where spans go (default: the global TracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracerProvider = tp }
}

// WithFailurePolicy sets what a call does when the store cannot answer (default FailClosed).
// FailLocal also needs WithHosts.
func WithFailurePolicy(p FailurePolicy) Option {
	return func(c *config) { c.failure = p }
}

// WithHosts tells FailLocal how many processes share the Limiter's limits: the
// N each limit is divided by while the store is down. Other policies ignore
// it; under FailLocal a nil hosts is a configuration error (see Limiter.Err).
//
// hosts may return a fixed count or one learned at run time, say from a
// heartbeat the workers keep in Redis (workers.Hosts). It is called for each
// call the local bucket answers, while the store is down: it must be cheap,
// safe for concurrent use, and must not need the store, so a count learned
// from the store must be answered from its last reading. A count below 1
// means unknown: calls then fail as under FailClosed.
//
// Counting too many hosts is safe: the fleet gets less than its limit.
// Counting too few is not: with k of N hosts missing from the count, a fleet in
// fallback may take N/(N−k) times its limit. When in doubt, count high.
func WithHosts(hosts func() int) Option {
	return func(c *config) { c.hosts = hosts }
}

// withProbeInterval sets how long FailLocal answers calls from the local bucket,
// without touching the store, after the store fails; then the next call asks
// the store again (default 1s): for tests. A non-positive d keeps the default.
func withProbeInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.probeInterval = d
		}
	}
}

// WithModeChange sets f to be called when the Limiter's Mode changes: from
// ModeShared to the failure policy's mode while the store cannot answer
// (ModeFallback, ModeClosed or ModeOpen; err is the store failure that caused
// it) and back to ModeShared when it answers again (err is nil), so that a
// program can log one line for an outage and one for its end; throttle
// itself does not log.
//
// f runs on the goroutine whose call caused the change, one change at a time
// and in the order they happen, while the Limiter holds its mode lock: it must
// return quickly and must not call the Limiter, except Mode.
func WithModeChange(f func(mode string, err error)) Option {
	return func(c *config) { c.onModeChange = f }
}

// withClock makes the mode timing of FailLocal (the probe interval) and its
// local bucket read time from clk: for tests.
func withClock(clk clock) Option {
	return func(c *config) { c.clock = clk }
}

// defaultRefundTimeout is withRefundTimeout's default.
const defaultRefundTimeout = 100 * time.Millisecond

// withRefundTimeout bounds the store call that gives back a cancelled
// reservation's tokens (default 100 ms): for tests. When Wait's context ends,
// that call runs after it, so Wait and Acquire return at most this long after
// their context ends: the price of giving the tokens back. A refund that does
// not finish in time is lost, which only wastes tokens, never grants extra
// ones.
func withRefundTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.refundTimeout = d
		}
	}
}

// WithBucketLabel adds the attribute sluice.bucket = label(key) to metrics and
// spans. label must map keys to a small, bounded set (a policy name, not a
// tenant id); by default no bucket attribute is recorded.
func WithBucketLabel(label func(key string) string) Option {
	return func(c *config) { c.label = label }
}

// FailurePolicy says what a Limiter does when its store cannot answer: when a
// store call fails, times out (the caller's deadline included), or answers
// badly. Whatever the policy, a call whose context is cancelled while it waits
// for the store returns the store's error: nobody is left to use a grant.
type FailurePolicy int

const (
	// FailClosed returns the store's error (matching ErrUnavailable): nothing is
	// granted while the store is down. This is the default.
	FailClosed FailurePolicy = iota
	// FailOpen grants every request while the store is down, counted in the
	// metric sluice.throttle.failopen. Use it only where exceeding the limit is
	// cheaper than not working.
	FailOpen
	// FailLocal limits each process by itself while the store is down: every
	// bucket is served from a bucket in this process (a memory store the Limiter
	// owns) with Rate/N per Period and Burst/N, where N is the number of live
	// hosts given by WithHosts. Burst/N is rounded down, but is at least 1, so
	// that a single token can always be had; a request for more tokens than
	// this host's share of Burst fails with the store's error (ErrUnavailable),
	// as do all calls while the count of hosts is below 1 (unknown).
	//
	// Bound: over any window of length t, N hosts in fallback take at most
	// N·(Burst/N + Rate/N·t/Period) tokens. With N right that is the limit
	// itself, Burst + Rate·t/Period, plus the rounding of Burst/N up to 1 token,
	// which adds at most N tokens (only when Burst < N). With k of the N hosts
	// missing from the count, every share is 1/(N−k) and the fleet may take
	// N/(N−k) times the limit. Each switch between modes may add one more
	// Burst, as the bucket that answers afterwards does not know what the other
	// granted. Hosts that can still reach the store keep the shared limit, so
	// a fleet cut off from its store in part stays within the limit plus the
	// cut-off hosts' shares.
	//
	// FailLocal needs WithHosts: without the number of hosts every call fails
	// with ErrInvalid, before any I/O. A default of one host would give each
	// process the full rate, so a fleet of N would take N times its limit
	// exactly when the store cannot stop it.
	//
	// After a store failure the Limiter is in fallback mode (Mode, WithModeChange,
	// the sluice.throttle.mode metric): for a second (the probe interval)
	// calls go straight to the local bucket without touching the store, so no
	// caller waits out a timeout against a dead server; after it, the next call
	// asks the store, and if the store answers the Limiter is back in shared mode.
	// Only one call at a time probes; the others stay local meanwhile. Grants
	// made locally are counted in sluice.throttle.fallback.grants.
	//
	// A Reservation made in fallback belongs to the local bucket: Cancel gives
	// its tokens back there, never to the store. Cooldown in fallback puts the
	// cooldown on the local bucket and returns nil: each host that is told to
	// back off does so, as each host limits itself; the store does not hear of
	// it. A store call cut short by its caller's cancelled context says nothing
	// about the store and does not change the mode.
	FailLocal
)

func (p FailurePolicy) String() string {
	switch p {
	case FailClosed:
		return "fail-closed"
	case FailOpen:
		return "fail-open"
	case FailLocal:
		return "fail-local"
	}
	return "unknown"
}
