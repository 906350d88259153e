package httplimit

import (
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// Option configures a Middleware.
type Option func(*config)

type config struct {
	name     string
	key      KeyFunc
	cost     int
	failOpen bool
	deny     http.Handler
	onError  ErrorHandler
	exempt   func(*http.Request) bool
	meter    metric.MeterProvider
}

// DefaultName is the policy name a Middleware states in its RateLimit and
// RateLimit-Policy fields unless WithName says otherwise.
const DefaultName = "default"

func newConfig(opts []Option) config {
	c := config{name: DefaultName, key: ByIP, cost: 1}
	for _, o := range opts {
		o(&c)
	}
	if c.key == nil {
		c.key = ByIP
	}
	if c.deny == nil {
		c.deny = http.HandlerFunc(tooManyRequests)
	}
	if c.onError == nil {
		c.onError = DefaultErrorHandler
	}
	if c.meter == nil {
		c.meter = otel.GetMeterProvider()
	}
	return c
}

// WithName names the policy (default "default"): the name the RateLimit and
// RateLimit-Policy fields give it, and the first part of every bucket the
// Middleware takes from, "<name>:<key>". Middlewares with different names never
// share a bucket, even on one Limiter; give two the same name only if they
// enforce the same policy. A name must be printable ASCII without '{', '}'
// or ':'; otherwise the Middleware is misconfigured (see Middleware.Err).
func WithName(name string) Option {
	return func(c *config) { c.name = name }
}

// WithKey sets how a request is mapped to its bucket (default ByIP). A nil f
// keeps the default.
func WithKey(f KeyFunc) Option {
	return func(c *config) { c.key = f }
}

// WithCost sets how many tokens (quota units) each request takes (default 1).
// It must be at least 1 and at most the policy's quota; otherwise the
// Middleware is misconfigured (see Middleware.Err).
func WithCost(n int) Option {
	return func(c *config) { c.cost = n }
}

// WithFailOpen makes the Middleware serve requests while the Limiter's store
// is down, without rate-limit headers, instead of failing closed (the
// default) with 503 Service Unavailable. Requests served so are counted in
// the metric sluice.httplimit.requests with outcome fail_open. A store that
// refuses this client (wrong password, ACL) is a misconfiguration, not an
// outage: the Middleware fails closed on it even so.
//
// This is about errors the Limiter returns. A Limiter built with
// throttle.WithFailurePolicy(throttle.FailOpen) returns none: its grants while
// the store is down look like ordinary ones, so the Middleware sends headers
// saying nothing is left. Leave the Limiter FailClosed and choose here; or use
// throttle.FailLocal, whose local limits the Middleware reports as usual.
func WithFailOpen() Option {
	return func(c *config) { c.failOpen = true }
}

// WithDenyHandler sets the handler that answers a request over the limit
// (default: 429 Too Many Requests with a short text body). When it runs, the
// response already carries Retry-After and the rate-limit header fields; it
// should write a 429 status, or another of its choice.
func WithDenyHandler(h http.Handler) Option {
	return func(c *config) { c.deny = h }
}

// WithErrorHandler sets the function that answers a request the Middleware
// could not decide on (default DefaultErrorHandler): no key (an error matching
// ErrNoKey), a key function's other errors, a misconfiguration (matching
// throttle.ErrInvalid), or the Limiter's store down (matching
// throttle.ErrUnavailable) when the Middleware fails closed. A handler that
// logs and then calls DefaultErrorHandler keeps the default answers.
func WithErrorHandler(f ErrorHandler) Option {
	return func(c *config) { c.onError = f }
}

// WithExempt makes requests for which f returns true bypass the limit: they
// take no token, get no rate-limit headers, and are not counted. f runs
// before the key function.
func WithExempt(f func(*http.Request) bool) Option {
	return func(c *config) { c.exempt = f }
}

// WithMeterProvider sets where metrics go (default: the global MeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meter = mp }
}
