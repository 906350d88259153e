package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/throttle"
)

// Middleware limits the requests that reach a handler: each request takes
// tokens (WithCost, default 1) from its key's bucket (WithKey, default ByIP)
// under one throttle.Policy, without waiting. A request that gets them is
// served; one that does not is answered 429 Too Many Requests with
// Retry-After, by default (WithDenyHandler).
//
// Both carry the rate-limit header fields: RateLimit and RateLimit-Policy
// (draft-ietf-httpapi-ratelimit-headers-11) and X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset (seconds from now, not a Unix
// time). For a policy of 100 per minute, after a first request:
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=99;t=1
//	X-RateLimit-Limit: 100
//	X-RateLimit-Remaining: 99
//	X-RateLimit-Reset: 1
//
// (a token bucket is whole again one token's time after a single request).
// Nested Middlewares with different names each add their policy to RateLimit
// and RateLimit-Policy; the X-RateLimit-* fields hold the innermost one's.
// The handler may overwrite them all. Requests exempted by WithExempt, and
// requests served because the store is down under WithFailOpen, carry none.
//
// When the Limiter's store cannot answer, the Middleware fails closed by
// default: 503 Service Unavailable with Retry-After: 5. Errors go to the
// error handler (WithErrorHandler, default DefaultErrorHandler); nothing
// panics on bad input or configuration.
//
// Its outcomes are counted in the metric sluice.httplimit.requests, by
// sluice.outcome (allowed, limited, fail_open, error) and sluice.policy (the
// name). Make one with New, then wrap handlers with Handler; any number of
// handlers wrapped by one Middleware share its buckets. A Middleware is safe
// for concurrent use.
type Middleware struct {
	lim    *throttle.Limiter
	policy throttle.Policy
	cfg    config
	quota  int
	fields fields
	tel    *telemetry
	err    error
}

// New returns a Middleware that limits requests through lim under policy: a
// throttle.Limit, or any other throttle.Policy. A misconfiguration (nil lim or
// policy, an invalid policy, name or cost) does not panic: every request is
// answered through the error handler (by default 500), and Err reports it;
// check Err once at start-up.
func New(lim *throttle.Limiter, policy throttle.Policy, opts ...Option) *Middleware {
	m := &Middleware{lim: lim, policy: policy, cfg: newConfig(opts)}
	m.tel = newTelemetry(m.cfg.meter, m.cfg.name)
	m.err = m.check()
	if m.err == nil {
		q, window := throttle.QuotaOf(policy)
		m.quota = q
		m.fields = newFields(m.cfg.name, q, window)
	}
	return m
}

func (m *Middleware) check() error {
	switch {
	case m.lim == nil:
		return invalidf("limiter is nil")
	case m.lim.Err() != nil:
		return m.lim.Err()
	case m.policy == nil:
		return invalidf("policy is nil")
	}
	if err := throttle.Validate(m.policy); err != nil {
		return err
	}
	if err := checkName(m.cfg.name); err != nil {
		return err
	}
	if q, _ := throttle.QuotaOf(m.policy); m.cfg.cost < 1 || m.cfg.cost > q {
		return invalidf("cost %d must be from 1 to the policy's quota, %d", m.cfg.cost, q)
	}
	return nil
}

// Err reports the Middleware's misconfiguration, which every request it
// limits is answered with; nil if it has none.
func (m *Middleware) Err() error { return m.err }

// Handler returns next wrapped by the limit. A nil next serves 404 Not Found
// to the requests the limit lets through.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	if next == nil {
		next = http.NotFoundHandler()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if m.cfg.exempt != nil && m.cfg.exempt(r) {
		next.ServeHTTP(w, r)
		return
	}
	ctx := r.Context()
	res, err := m.take(r)
	switch {
	case err != nil && m.cfg.failOpen && outage(err):
		m.tel.count(ctx, outFailOpen)
		next.ServeHTTP(w, r)
	case err != nil:
		m.tel.count(ctx, outError)
		m.cfg.onError(w, r, err)
	case !res.Allowed:
		m.fields.set(w.Header(), m.quota, res)
		m.tel.count(ctx, outLimited)
		m.cfg.deny.ServeHTTP(w, r)
	default:
		m.fields.set(w.Header(), m.quota, res)
		m.tel.count(ctx, outAllowed)
		next.ServeHTTP(w, r)
	}
}

// take finds r's bucket and tries to take the request's cost from it.
func (m *Middleware) take(r *http.Request) (throttle.Result, error) {
	if m.err != nil {
		return throttle.Result{}, m.err
	}
	key, err := m.cfg.key(r)
	if err != nil {
		return throttle.Result{}, err
	}
	bucket, err := bucketName(m.cfg.name, key, throttle.MaxKeyLen)
	if err != nil {
		return throttle.Result{}, err
	}
	return m.lim.TryAcquire(r.Context(), bucket, m.policy, m.cfg.cost)
}

// outage reports whether err is the store being down, which WithFailOpen
// serves through; a store that refused this client is not.
func outage(err error) bool {
	return errors.Is(err, throttle.ErrUnavailable) && !errors.Is(err, throttle.ErrRefused)
}

// ErrorHandler answers a request the Middleware could not decide on; see
// WithErrorHandler.
type ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)

// DefaultErrorHandler answers err with a short text body: 400 Bad Request for
// a request without a key (ErrNoKey), 503 Service Unavailable with
// Retry-After: 5 for a store that cannot answer (throttle.ErrUnavailable),
// and 500 Internal Server Error for anything else, such as a
// misconfiguration (throttle.ErrInvalid). The body does not include err.
func DefaultErrorHandler(w http.ResponseWriter, _ *http.Request, err error) {
	switch {
	case errors.Is(err, ErrNoKey):
		http.Error(w, "missing rate-limit key", http.StatusBadRequest)
	case errors.Is(err, throttle.ErrUnavailable):
		w.Header().Set(headerRetryAfter, strconv.FormatInt(seconds(unavailableRetry), 10))
		http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
	default:
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
	}
}

// tooManyRequests is the default deny handler.
func tooManyRequests(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
}

// invalidf is a configuration error, matching throttle.ErrInvalid.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("httplimit: "+format+": %w", append(args, throttle.ErrInvalid)...)
}
