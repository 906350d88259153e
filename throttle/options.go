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
}

func newConfig(opts []Option) config {
	c := config{prefix: DefaultKeyPrefix, refundTimeout: time.Second}
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

// WithMeterProvider sets where metrics go (default: the global MeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meterProvider = mp }
}

// WithTracerProvider sets where spans go (default: the global TracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracerProvider = tp }
}

// WithFailurePolicy sets what a call does when the store cannot answer (default FailClosed).
func WithFailurePolicy(p FailurePolicy) Option {
	return func(c *config) { c.failure = p }
}

// WithRefundTimeout bounds the store call that gives back a cancelled
// reservation's tokens; it runs after the caller's context has ended (default 1s).
func WithRefundTimeout(d time.Duration) Option {
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

// FailurePolicy says what a Limiter does when its store cannot answer.
type FailurePolicy int

const (
	// FailClosed returns the store's error (matching ErrUnavailable): nothing is
	// granted while the store is down. This is the default.
	FailClosed FailurePolicy = iota
	// FailOpen grants every request while the store is down, counted in the
	// metric sluice.throttle.failopen. Use it only where exceeding the limit is
	// cheaper than not working.
	FailOpen
)

func (p FailurePolicy) String() string {
	switch p {
	case FailClosed:
		return "fail-closed"
	case FailOpen:
		return "fail-open"
	}
	return "unknown"
}
