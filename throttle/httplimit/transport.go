package httplimit

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/throttle"
)

// Transport is an http.RoundTripper for calling a rate-limited API. Before
// each request it takes a token from the request's bucket under Limit,
// waiting for it as Limiter.Acquire does, bounded by the request's context;
// then it sends the request through Base. Answers are read by the parser and
// the rule the job pool uses too (backoff.ParseAnswer, backoff.UpstreamRule):
// a refusal (a 429 Too Many Requests, a 503 Service Unavailable, or a 403
// Forbidden with a spent quota or a Retry-After, as GitHub answers) that
// asks for a wait (Retry-After, retry-after-ms, a JSON body's retry_after,
// a spent quota's reset), or a 429 or limit's 403 without one (for the
// rule's backoff), puts the bucket in cooldown (Limiter.Cooldown), so that
// every process that shares the bucket through the Limiter's store, not only
// this one, sends nothing on it until the cooldown ends, and then resumes at
// Limit's pace; a 503 without a wait is an outage, not a limit, and pauses
// no one.
//
// The response is returned to the caller as it came, 429 included: whether to
// retry is the caller's choice, and a retry through the Transport waits out
// the cooldown. Set Retries to have the Transport retry by itself.
//
// Its zero value is not usable: Limiter and Limit are required. A Transport
// is safe for concurrent use once its fields are set; do not change them
// afterwards.
type Transport struct {
	// Base sends the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Limiter keeps the buckets; required. Share its store (Redis) across
	// processes to share the limit and the cooldowns.
	Limiter *throttle.Limiter
	// Limit is the policy of each bucket, any throttle.Policy; required
	// unless Adapt is set.
	Limit throttle.Policy
	// Adapt, if set, makes each bucket adaptive (throttle.Adaptive): its
	// Ceiling replaces Limit, and the fleet's effective rate, shared through
	// the Limiter's store with every Transport and worker pool on the same
	// bucket, falls after a refusal, climbs back with successes, and follows
	// the quota of requests the upstream announces, in any dialect
	// backoff.ParseAnswer reads (a spent quota holds the bucket until its
	// announced reset), or the capacity it announces without a rate
	// (backoff.Quota.CapacityRate). While the bucket is cold (no answer
	// yet), one request at a time, fleet-wide, is sent and its answer sets
	// the rate before the burst is granted, on the claim the worker pools
	// use too. Quotas of tokens are read and apply to no bucket.
	Adapt *throttle.Adaptive
	// Key names a request's bucket, as a bucket name for the Limiter; nil
	// means the request's host, req.URL.Host ("api.example.com:8443"). Use
	// the same name a worker pool uses for that API to share its bucket.
	Key func(*http.Request) string

	// Backoff is the rule's backoff for a refusal without a valid
	// Retry-After, by attempt (backoff.UpstreamRule); the zero value means
	// backoff.UpstreamBackoff: 1 s, then 2 s, 4 s, ... for the Transport's
	// own retries of one request. A Retry-After of 0, or a date that has
	// passed, means no cooldown.
	Backoff backoff.Exponential
	// MaxCooldown caps every cooldown, so that an upstream asking for a day
	// (backoff.MaxRetryAfter is the most it can ask) does not stall every
	// process for a day; 0 means no cap but that.
	MaxCooldown time.Duration

	// Retries is how many times the Transport itself resends a request that
	// was refused (a 429, a 503, a limit's 403), each time after the cooldown
	// (or, after a 503 without a wait, the backoff);
	// 0, the default, means never. Only requests whose body can be sent again
	// are retried (no body, or GetBody set, as http.NewRequest does for
	// in-memory bodies), and only when the request's context leaves time for
	// the cooldown; otherwise the response is returned as it came. The body
	// of a response that is retried is read (up to 64 KiB) and closed.
	Retries int

	// OnCooldown, if set, is called after each attempt to cool a bucket down,
	// with the bucket, the cooldown and the Limiter's error (nil on success),
	// so that a program can log it; RoundTrip cannot return that error
	// alongside the response. It runs on the request's goroutine.
	OnCooldown func(key string, d time.Duration, err error)
	// OnMalformed, if set, is called the first time an answer on bucket key
	// has rate-limit fields that cannot be read (backoff.Answer.Problems,
	// joined in err; they are ignored): once per bucket and Limiter for the
	// life of the process, so that a program warns once per upstream. It
	// runs on the request's goroutine.
	OnMalformed func(key string, err error)
}

// malformed holds the buckets whose unreadable fields OnMalformed was told
// of, by Limiter.
var malformed sync.Map // warnedKey → struct{}

type warnedKey struct {
	lim *throttle.Limiter
	key string
}

// policy is what a bucket takes tokens under: Limit, or with Adapt the
// adaptive bucket, which the store takes at the fleet's effective rate.
func (t *Transport) policy() throttle.Policy {
	if t.Adapt == nil {
		return t.Limit
	}
	return *t.Adapt
}

// answer parses resp, the answer on bucket key, and tells OnMalformed of
// fields it could not read. The body of a refusal that says it is JSON is
// read, up to maxAnswerBody, for its retry_after, and put back for the caller.
func (t *Transport) answer(key string, resp *http.Response) backoff.Answer {
	var body []byte
	if resp.StatusCode == http.StatusTooManyRequests && resp.Body != nil &&
		strings.Contains(resp.Header.Get("Content-Type"), "json") {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, maxAnswerBody))
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
	}
	a := backoff.ParseAnswer(resp.StatusCode, resp.Header, body, time.Now())
	if len(a.Problems) > 0 && t.OnMalformed != nil {
		if _, told := malformed.LoadOrStore(warnedKey{t.Limiter, key}, struct{}{}); !told {
			t.OnMalformed(key, errors.Join(a.Problems...))
		}
	}
	return a
}

// maxAnswerBody is how much of a refusal's body answer reads.
const maxAnswerBody = 4 << 10

// observe reports an answer to an adaptive bucket: the quota of requests it
// announces (a rate, or a capacity: announce), then its refusal or success.
// A spent quota holds the bucket until its reset; once the upstream's word
// bounds the rate, a spent quota (GitHub's 403 with x-ratelimit-remaining:
// 0) is that wait, not an overload, and lowers nothing. probe says this
// answer is the cold start's (coldstart.go).
func (t *Transport) observe(ctx context.Context, key string, ans backoff.Answer, refused, probe bool) {
	if t.Adapt == nil {
		return
	}
	a := *t.Adapt
	cctx := context.WithoutCancel(ctx) // the Limiter bounds its adaptive store calls
	ad := t.Limiter
	spentAtWord := false
	if q, ok := ans.Quota(backoff.Requests); ok {
		bound := t.announce(cctx, key, q, probe)
		if q.Exhausted && q.Reset > 0 && !refused {
			t.cooldown(ctx, key, min(q.Reset, t.maxCooldown()))
		}
		spentAtWord = q.Exhausted && q.Reset > 0 && bound > 0
	}
	if refused {
		if !spentAtWord {
			_, _, _ = ad.Refused(cctx, key, a)
		}
		return
	}
	if ans.Status < 400 {
		_ = ad.Succeeded(cctx, key, a)
	}
}

// maxCooldown is MaxCooldown, or no cap but backoff.MaxRetryAfter.
func (t *Transport) maxCooldown() time.Duration {
	if t.MaxCooldown > 0 {
		return t.MaxCooldown
	}
	return backoff.MaxRetryAfter
}

const (
	// cooldownTimeout bounds the store calls that set and check cooldowns;
	// they run on a context of their own, as the request's may be ending.
	cooldownTimeout = time.Second
	// maxDrain is how much of a response body is read before it is closed
	// for a retry, so its connection can be reused.
	maxDrain = 64 << 10
)

// ErrNoBucket is returned by Transport.RoundTrip when the request names no
// bucket: Key returned "" (by default, the request has no host).
var ErrNoBucket = errors.New("httplimit: request names no bucket")

// RoundTrip takes a token for req, sends it through Base, and cools the
// bucket down if the response asks for it; see Transport. As the
// http.RoundTripper contract requires, req's body is closed even on errors.
//
// It fails, without sending req, with the Limiter's error: an error matching
// throttle.ErrInvalid for a misconfigured Transport, throttle.ErrUnavailable
// for a store that cannot answer (unless the Limiter's failure policy says
// otherwise), a *throttle.LimitedError if the wait would pass req's context
// deadline, or the context's error if it ends during the wait (the token
// goes back to the bucket). ErrNoBucket if Key names none. An http.Client wraps these in a *url.Error; errors.Is
// and errors.As see through it.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	key, err := t.key(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		probe := t.askFirst(ctx, key) // a cold adaptive bucket asks first (coldstart.go)
		if err := t.acquire(ctx, key); err != nil {
			t.endProbe(ctx, probe)
			closeBody(req)
			return nil, err
		}
		resp, err := t.base().RoundTrip(req)
		if err != nil {
			t.endProbe(ctx, probe)
			return nil, err
		}
		ans := t.answer(key, resp)
		d, cool, refused := t.refusal(ans, attempt)
		t.observe(ctx, key, ans, refused, probe != nil)
		t.endProbe(ctx, probe)
		if !refused {
			return resp, nil
		}
		if cool {
			t.cooldown(ctx, key, d)
		}
		if attempt >= t.Retries {
			return resp, nil
		}
		next, ok := rewind(req, d)
		if !ok {
			return resp, nil
		}
		drain(resp.Body)
		if !cool && !sleep(ctx, d) { // a cooldown is waited out in acquire
			return resp, nil
		}
		req = next
	}
}

// CloseIdleConnections closes the idle connections of Base, if it has any
// such method; http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *Transport) key(req *http.Request) (string, error) {
	if t.Limiter == nil {
		return "", invalidf("Transport.Limiter is nil")
	}
	var key string
	switch {
	case t.Key != nil:
		key = t.Key(req)
	case req.URL != nil:
		key = req.URL.Host
	}
	if key == "" {
		return "", ErrNoBucket
	}
	return key, nil
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

// acquire takes a token from the bucket key, waiting for it if need be, as
// Limiter.Acquire does. A token booked before a cooldown began may fall in
// it; after waiting for one, acquire checks, and if the bucket is in
// cooldown now it takes a new token, which comes after the cooldown.
func (t *Transport) acquire(ctx context.Context, key string) error {
	for {
		maxWait := time.Duration(-1) // no bound
		dl, hasDeadline := ctx.Deadline()
		if hasDeadline {
			maxWait = max(0, time.Until(dl))
		}
		r, err := t.Limiter.Reserve(ctx, key, t.policy(), 1, maxWait)
		if err != nil {
			return err
		}
		waits := r.Delay() > 0
		if waits && hasDeadline && r.Time().After(dl) {
			// The budget was measured before the round trip; the slot, after
			// it. No sleeping just to fail: give the token back.
			late := r.Delay()
			_ = r.Cancel(ctx)
			return &throttle.LimitedError{RetryAfter: late}
		}
		if err := r.Wait(ctx); err != nil {
			return err
		}
		if !waits {
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, cooldownTimeout)
		left, err := t.Limiter.CooldownLeft(cctx, key)
		cancel()
		if err != nil || left <= 0 {
			// A store that cannot say keeps the token it already granted.
			return nil
		}
	}
}

// refusal applies backoff.UpstreamRule to a, the answer to attempt (0 the
// first): whether it is a refusal, and if so how long to wait and whether
// the bucket cools down for it. MaxCooldown caps the wait.
func (t *Transport) refusal(a backoff.Answer, attempt int) (d time.Duration, cool, refused bool) {
	d, cool, refused = backoff.UpstreamRule{Backoff: t.Backoff}.Answer(a, attempt)
	if t.MaxCooldown > 0 {
		d = min(d, t.MaxCooldown)
	}
	return d, cool && d > 0, refused
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// cooldown puts the bucket key in cooldown for d, on a context of its own:
// the request's may end as soon as the caller has the response, and the
// other processes still need to hear of the cooldown.
func (t *Transport) cooldown(ctx context.Context, key string, d time.Duration) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cooldownTimeout)
	defer cancel()
	_, err := t.Limiter.Cooldown(cctx, key, t.policy(), d)
	if t.OnCooldown != nil {
		t.OnCooldown(key, d, err)
	}
}

// rewind returns a copy of req to send again after a cooldown of d, if its
// body can be sent again and its context leaves time for the cooldown.
func rewind(req *http.Request, d time.Duration) (*http.Request, bool) {
	ctx := req.Context()
	if ctx.Err() != nil {
		return nil, false
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return nil, false
	}
	next := req.Clone(ctx)
	switch {
	case req.Body == nil || req.Body == http.NoBody:
	case req.GetBody != nil:
		body, err := req.GetBody()
		if err != nil {
			return nil, false
		}
		next.Body = body
	default:
		return nil, false
	}
	return next, true
}

func drain(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, maxDrain)
	_ = body.Close()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
