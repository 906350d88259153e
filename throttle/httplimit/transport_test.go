package httplimit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// upstream is a fake third-party API: it answers each request with the next
// of its scripted responses (the last one repeats), and records when each
// request arrived and what body it carried.
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	script  []reply
	arrived []time.Time
	bodies  []string
}

type reply struct {
	code       int
	retryAfter string // "" for none
}

func newUpstream(t *testing.T, script ...reply) *upstream {
	u := &upstream{script: script}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		i := min(len(u.arrived), len(u.script)-1)
		u.arrived = append(u.arrived, time.Now())
		u.bodies = append(u.bodies, string(body))
		rep := u.script[i]
		u.mu.Unlock()
		if rep.retryAfter != "" {
			w.Header().Set("Retry-After", rep.retryAfter)
		}
		w.WriteHeader(rep.code)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) times() []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]time.Time(nil), u.arrived...)
}

func (u *upstream) received() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.bodies...)
}

func (u *upstream) host() string {
	p, _ := url.Parse(u.URL)
	return p.Host
}

// fastLimit lets requests through at once but for cooldowns.
var fastLimit = throttle.Limit{Rate: 100, Period: time.Second, Burst: 10}

func client(tr *Transport) *http.Client { return &http.Client{Transport: tr} }

func send(t *testing.T, c *http.Client, u string) *http.Response {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}

func TestTransportCooldown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		up := newUpstream(t, reply{429, "1"}, reply{200, ""})
		lim := b.newLimiter(t)
		c := client(&Transport{Base: up.Client().Transport, Limiter: lim, Limit: fastLimit})

		resp := send(t, c, up.URL)
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the 429 is the caller's")
		assert.Equal(t, "1", resp.Header.Get("Retry-After"))
		left, err := lim.CooldownLeft(context.Background(), up.host())
		require.NoError(t, err)
		assert.Greater(t, left, time.Duration(0))
		assert.LessOrEqual(t, left, time.Second)

		resp = send(t, c, up.URL)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		times := up.times()
		require.Len(t, times, 2)
		gap := times[1].Sub(times[0])
		assert.GreaterOrEqual(t, gap, 950*time.Millisecond, "a request inside the cooldown")
		assert.Less(t, gap, 5*time.Second)
	})
}

// TestTransportCooldownShared: another process (its own client and Limiter
// over the same Redis) honours the cooldown that one process was told of.
func TestTransportCooldownShared(t *testing.T) {
	srv := redistest.Shared(t)
	prefix := redistest.Prefix(t)
	process := func() *Transport {
		store := throttle.NewRedisStore(srv.Client(t))
		t.Cleanup(func() { _ = store.Close() })
		return &Transport{Limiter: throttle.NewLimiter(store, throttle.WithKeyPrefix(prefix)), Limit: fastLimit}
	}
	up := newUpstream(t, reply{429, "1"}, reply{200, ""})
	one, two := process(), process()
	one.Base, two.Base = up.Client().Transport, up.Client().Transport

	resp := send(t, client(one), up.URL)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	left, err := two.Limiter.CooldownLeft(context.Background(), up.host())
	require.NoError(t, err)
	assert.Greater(t, left, time.Duration(0), "the other process sees the cooldown")

	var wg sync.WaitGroup
	for _, tr := range []*Transport{one, two} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client(tr).Get(up.URL)
			if assert.NoError(t, err) {
				_ = resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	times := up.times()
	require.Len(t, times, 3)
	for i, at := range times[1:] {
		gap := at.Sub(times[0])
		assert.GreaterOrEqual(t, gap, 950*time.Millisecond, "request %d inside the cooldown", i+1)
		assert.Less(t, gap, 5*time.Second, "request %d", i+1)
	}
}

func TestTransportCooldownFor(t *testing.T) {
	inAnHour := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	cases := []struct {
		name  string
		tr    Transport
		reply reply
		want  time.Duration // cooldown left at most this; 0: none
	}{
		{"429 with Retry-After", Transport{}, reply{429, "2"}, 2 * time.Second},
		{"429 with a date", Transport{}, reply{429, inAnHour}, time.Hour},
		{"429 without Retry-After: 1 s", Transport{}, reply{429, ""}, time.Second},
		{"429 with garbage: 1 s", Transport{}, reply{429, "soon"}, time.Second},
		{"429 without, own Backoff", Transport{Backoff: backoff.Exponential{Base: 300 * time.Millisecond}}, reply{429, ""}, 300 * time.Millisecond},
		{"429 Retry-After 0", Transport{}, reply{429, "0"}, 0},
		{"MaxCooldown caps", Transport{MaxCooldown: 300 * time.Millisecond}, reply{429, "3600"}, 300 * time.Millisecond},
		{"503 with Retry-After", Transport{}, reply{503, "2"}, 2 * time.Second},
		{"503 without Retry-After", Transport{}, reply{503, ""}, 0},
		{"503 with garbage", Transport{}, reply{503, "soon"}, 0},
		{"500 with Retry-After", Transport{}, reply{500, "2"}, 0},
		{"200", Transport{}, reply{200, "2"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := newUpstream(t, c.reply)
			tr := c.tr
			tr.Base, tr.Limiter, tr.Limit = up.Client().Transport, throttle.NewLimiter(throttle.NewMemoryStore()), fastLimit
			var calls []time.Duration
			tr.OnCooldown = func(key string, d time.Duration, err error) {
				assert.Equal(t, up.host(), key)
				assert.NoError(t, err)
				calls = append(calls, d)
			}
			resp := send(t, client(&tr), up.URL)
			assert.Equal(t, c.reply.code, resp.StatusCode)
			left, err := tr.Limiter.CooldownLeft(context.Background(), up.host())
			require.NoError(t, err)
			if c.want == 0 {
				assert.Zero(t, left)
				assert.Empty(t, calls)
				return
			}
			assert.Greater(t, left, c.want/2)
			assert.LessOrEqual(t, left, c.want)
			require.Len(t, calls, 1)
			assert.LessOrEqual(t, calls[0], c.want)
		})
	}
}

func TestTransportRetries(t *testing.T) {
	up := newUpstream(t, reply{429, ""}, reply{200, ""})
	tr := &Transport{
		Base: up.Client().Transport, Limiter: throttle.NewLimiter(throttle.NewMemoryStore()), Limit: fastLimit,
		Backoff: backoff.Exponential{Base: 300 * time.Millisecond}, Retries: 2,
	}
	resp, err := client(tr).Post(up.URL, "text/plain", strings.NewReader("payload")) // GetBody set
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	times := up.times()
	require.Len(t, times, 2)
	assert.GreaterOrEqual(t, times[1].Sub(times[0]), 250*time.Millisecond)
	assert.Equal(t, []string{"payload", "payload"}, up.received())
}

func TestTransportRetriesAnOutageWithoutPausingOthers(t *testing.T) {
	up := newUpstream(t, reply{503, ""}, reply{200, ""})
	tr := &Transport{
		Base: up.Client().Transport, Limiter: throttle.NewLimiter(throttle.NewMemoryStore()), Limit: fastLimit,
		Backoff: backoff.Exponential{Base: 300 * time.Millisecond}, Retries: 2,
	}
	var cooled []time.Duration
	tr.OnCooldown = func(_ string, d time.Duration, _ error) { cooled = append(cooled, d) }
	resp := send(t, client(tr), up.URL)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	times := up.times()
	require.Len(t, times, 2)
	assert.GreaterOrEqual(t, times[1].Sub(times[0]), 250*time.Millisecond, "the retry waits the backoff")
	assert.Empty(t, cooled, "a 503 without Retry-After pauses no one")
}

func TestTransportRetriesOnlyReplayable(t *testing.T) {
	up := newUpstream(t, reply{429, ""}, reply{200, ""})
	tr := &Transport{
		Base: up.Client().Transport, Limiter: throttle.NewLimiter(throttle.NewMemoryStore()), Limit: fastLimit,
		Backoff: backoff.Exponential{Base: 300 * time.Millisecond}, Retries: 2,
	}
	req, err := http.NewRequest(http.MethodPost, up.URL, io.NopCloser(strings.NewReader("once"))) // no GetBody
	require.NoError(t, err)
	resp, err := client(tr).Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Len(t, up.times(), 1)
}

func TestTransportRetriesWithinDeadline(t *testing.T) {
	up := newUpstream(t, reply{429, "60"}, reply{200, ""})
	tr := &Transport{Base: up.Client().Transport, Limiter: throttle.NewLimiter(throttle.NewMemoryStore()), Limit: fastLimit, Retries: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, up.URL, nil)
	require.NoError(t, err)
	start := time.Now()
	resp, err := client(tr).Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the cooldown is past the deadline: no retry")
	assert.Less(t, time.Since(start), 4*time.Second)
}

// TestTransportDeadline: a request whose deadline comes before the cooldown
// ends fails at once with a *throttle.LimitedError, and is not sent.
func TestTransportDeadline(t *testing.T) {
	up := newUpstream(t, reply{200, ""})
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	_, err := lim.Cooldown(context.Background(), up.host(), fastLimit, time.Minute)
	require.NoError(t, err)
	c := client(&Transport{Base: up.Client().Transport, Limiter: lim, Limit: fastLimit})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, up.URL, nil)
	require.NoError(t, err)
	start := time.Now()
	_, err = c.Do(req)
	var limited *throttle.LimitedError
	require.ErrorAs(t, err, &limited)
	assert.ErrorIs(t, err, throttle.ErrLimited)
	assert.Greater(t, limited.RetryAfter, 50*time.Second)
	assert.Less(t, time.Since(start), 4*time.Second, "no sleeping just to fail")
	assert.Empty(t, up.times())
}

// TestTransportCancel: a request whose context ends while it waits returns
// the context's error, closes its body, and is not sent.
func TestTransportCancel(t *testing.T) {
	up := newUpstream(t, reply{200, ""})
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	_, err := lim.Cooldown(context.Background(), up.host(), fastLimit, time.Minute)
	require.NoError(t, err)
	tr := &Transport{Base: up.Client().Transport, Limiter: lim, Limit: fastLimit}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	body := &closeCounter{Reader: strings.NewReader("x")}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, up.URL, body)
	require.NoError(t, err)
	_, err = tr.RoundTrip(req)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, body.closed)
	assert.Empty(t, up.times())
}

// TestTransportCooldownAfterBooking: a request that booked its turn before a
// cooldown began, for a slot inside it, waits for the cooldown too.
func TestTransportCooldownAfterBooking(t *testing.T) {
	up := newUpstream(t, reply{200, ""})
	slow := throttle.Limit{Rate: 5, Period: time.Second, Burst: 1} // a token every 200 ms
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	c := client(&Transport{Base: up.Client().Transport, Limiter: lim, Limit: slow})
	send(t, c, up.URL) // the token is gone; the next request books a slot 200 ms away

	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := c.Get(up.URL)
		if assert.NoError(t, err) {
			_ = resp.Body.Close()
		}
	}()
	time.Sleep(50 * time.Millisecond) // let it book (if it has not, it waits for the cooldown anyway)
	cooled := time.Now()
	_, err := lim.Cooldown(context.Background(), up.host(), slow, time.Second)
	require.NoError(t, err)
	<-done
	times := up.times()
	require.Len(t, times, 2)
	assert.GreaterOrEqual(t, times[1].Sub(cooled), 950*time.Millisecond)
}

func TestTransportErrors(t *testing.T) {
	up := newUpstream(t, reply{200, ""})
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	cases := []struct {
		name string
		tr   *Transport
		want error
	}{
		{"nil limiter", &Transport{Limit: fastLimit}, throttle.ErrInvalid},
		{"invalid limit", &Transport{Limiter: lim}, throttle.ErrInvalid},
		{"no bucket", &Transport{Limiter: lim, Limit: fastLimit, Key: func(*http.Request) string { return "" }}, ErrNoBucket},
		{"store down", &Transport{Limiter: deadLimiter(t), Limit: fastLimit}, throttle.ErrUnavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.tr.Base = up.Client().Transport
			body := &closeCounter{Reader: strings.NewReader("x")}
			req, err := http.NewRequest(http.MethodPost, up.URL, body)
			require.NoError(t, err)
			resp, err := c.tr.RoundTrip(req)
			assert.Nil(t, resp)
			assert.ErrorIs(t, err, c.want)
			assert.Equal(t, 1, body.closed, "the body is closed")
		})
	}
	assert.Empty(t, up.times(), "nothing was sent")
}

func TestTransportKey(t *testing.T) {
	up := newUpstream(t, reply{429, "30"})
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	tr := &Transport{
		Base: up.Client().Transport, Limiter: lim, Limit: fastLimit,
		Key: func(*http.Request) string { return "crm" },
	}
	send(t, client(tr), up.URL)
	left, err := lim.CooldownLeft(context.Background(), "crm")
	require.NoError(t, err)
	assert.Greater(t, left, 20*time.Second)
}

func TestTransportPassesErrors(t *testing.T) {
	boom := errors.New("connection reset")
	tr := &Transport{
		Base:    roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, boom }),
		Limiter: throttle.NewLimiter(throttle.NewMemoryStore()), Limit: fastLimit,
	}
	req, err := http.NewRequest(http.MethodGet, "http://api.example/", nil)
	require.NoError(t, err)
	_, err = tr.RoundTrip(req)
	assert.ErrorIs(t, err, boom)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	*strings.Reader
	closed int
}

func (c *closeCounter) Close() error {
	c.closed++
	return nil
}
