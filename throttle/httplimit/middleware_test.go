package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/throttle"
)

// threePerMinute grants 3 at once, then one every 20 s.
var threePerMinute = throttle.Limit{Rate: 3, Period: time.Minute, Burst: 3}

func TestHeaders(t *testing.T) {
	// Each step is one request from one client at a fixed instant.
	steps := []struct {
		at         time.Duration
		code       int
		remaining  string
		reset      string // X-RateLimit-Reset and RateLimit's t
		retryAfter string // "" when there must be none
	}{
		{at: 0, code: 200, remaining: "2", reset: "20"},
		{at: 0, code: 200, remaining: "1", reset: "40"},
		{at: 0, code: 200, remaining: "0", reset: "60"},
		{at: 0, code: 429, remaining: "0", reset: "20", retryAfter: "20"},
		{at: 10500 * time.Millisecond, code: 429, remaining: "0", reset: "10", retryAfter: "10"},        // 9.5 s, rounded up
		{at: 20*time.Second - time.Millisecond, code: 429, remaining: "0", reset: "1", retryAfter: "1"}, // 1 ms: never 0
		{at: 20 * time.Second, code: 200, remaining: "0", reset: "60"},
		{at: 40*time.Second + 500*time.Millisecond, code: 200, remaining: "0", reset: "60"}, // 59.5 s, rounded up
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		clk := newClock()
		next := &okHandler{}
		m := New(b.newLimiter(t, throttle.WithClock(clk)), threePerMinute)
		require.NoError(t, m.Err())
		h := m.Handler(next)
		served := 0
		for i, s := range steps {
			clk.at(s.at)
			rec := get(h, "192.0.2.1:1234")
			msg := fmt.Sprintf("step %d", i)
			hd := rec.Header()
			assert.Equal(t, s.code, rec.Code, msg)
			assert.Equal(t, "3", hd.Get("X-RateLimit-Limit"), msg)
			assert.Equal(t, s.remaining, hd.Get("X-RateLimit-Remaining"), msg)
			assert.Equal(t, s.reset, hd.Get("X-RateLimit-Reset"), msg)
			assert.Equal(t, []string{`"default";q=3;w=60`}, hd.Values("RateLimit-Policy"), msg)
			assert.Equal(t, []string{`"default";r=` + s.remaining + ";t=" + s.reset}, hd.Values("RateLimit"), msg)
			assert.Equal(t, s.retryAfter, hd.Get("Retry-After"), msg)
			if s.code == 200 {
				served++
			}
			assert.Equal(t, served, next.served(), msg)
		}
	})
}

func TestRemainingDecreasesThen429(t *testing.T) {
	// Real time: only what cannot depend on it is checked.
	limit := throttle.Limit{Rate: 5, Period: time.Hour, Burst: 5}
	forEachBackend(t, func(t *testing.T, b backend) {
		h := New(b.newLimiter(t), limit, WithName("per-hour")).Handler(&okHandler{})
		for i := range 5 {
			rec := get(h, "192.0.2.1:1234")
			require.Equal(t, http.StatusOK, rec.Code, "request %d", i)
			assert.Equal(t, strconv.Itoa(4-i), rec.Header().Get("X-RateLimit-Remaining"), "request %d", i)
		}
		rec := get(h, "192.0.2.1:1234")
		require.Equal(t, http.StatusTooManyRequests, rec.Code)
		retry, err := strconv.Atoi(rec.Header().Get("Retry-After"))
		require.NoError(t, err)
		assert.GreaterOrEqual(t, retry, 1)
		assert.LessOrEqual(t, retry, 720) // one token: 12 minutes
		assert.Equal(t, `"per-hour";q=5;w=3600`, rec.Header().Get("RateLimit-Policy"))
		assert.Equal(t, fmt.Sprintf(`"per-hour";r=0;t=%d`, retry), rec.Header().Get("RateLimit"))
		assert.Equal(t, "5", rec.Header().Get("X-RateLimit-Limit"))
		assert.Equal(t, "0", rec.Header().Get("X-RateLimit-Remaining"))
		assert.Contains(t, rec.Body.String(), "Too Many Requests")
	})
}

func TestKeysAreIndependent(t *testing.T) {
	limit := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	forEachBackend(t, func(t *testing.T, b backend) {
		h := New(b.newLimiter(t), limit).Handler(&okHandler{})
		assert.Equal(t, http.StatusOK, get(h, "192.0.2.1:1").Code)
		assert.Equal(t, http.StatusTooManyRequests, get(h, "192.0.2.1:2").Code, "same address, other port")
		assert.Equal(t, http.StatusOK, get(h, "192.0.2.2:1").Code)
		assert.Equal(t, http.StatusOK, get(h, "[2001:db8::1]:1").Code)
		assert.Equal(t, http.StatusTooManyRequests, get(h, "[2001:db8::2]:1").Code, "same /64")
		assert.Equal(t, http.StatusOK, get(h, "[2001:db8:0:1::1]:1").Code, "other /64")
	})
}

func TestNamesKeepBucketsApart(t *testing.T) {
	limit := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	forEachBackend(t, func(t *testing.T, b backend) {
		lim := b.newLimiter(t)
		a := New(lim, limit, WithName("a")).Handler(&okHandler{})
		a2 := New(lim, limit, WithName("a")).Handler(&okHandler{})
		other := New(lim, limit, WithName("b")).Handler(&okHandler{})
		assert.Equal(t, http.StatusOK, get(a, "192.0.2.1:1").Code)
		assert.Equal(t, http.StatusTooManyRequests, get(a2, "192.0.2.1:1").Code, "same name, same bucket")
		assert.Equal(t, http.StatusOK, get(other, "192.0.2.1:1").Code)
	})
}

// A key holding ':' cannot reach the bucket of another name: with "a" keyed
// "b:c" and "a:b" keyed "c" both would be "a:b:c", so a name holds no ':'.
func TestNamesKeepBucketsApartWhateverTheKey(t *testing.T) {
	limit := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	keyed := func(k string) Option {
		return WithKey(func(*http.Request) (string, error) { return k, nil })
	}
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	a := New(lim, limit, WithName("a"), keyed("b:c"))
	ab := New(lim, limit, WithName("a:b"), keyed("c"))
	assert.Equal(t, http.StatusOK, get(a.Handler(&okHandler{}), "192.0.2.1:1").Code)
	assert.NotEqual(t, http.StatusTooManyRequests, get(ab.Handler(&okHandler{}), "192.0.2.1:1").Code, "another name's bucket")
	assert.ErrorIs(t, ab.Err(), throttle.ErrInvalid)
}

func TestLongAndOddKeys(t *testing.T) {
	limit := throttle.Limit{Rate: 2, Period: time.Hour, Burst: 2}
	byHeader := WithKey(func(r *http.Request) (string, error) { return r.Header.Get("K"), nil })
	long := strings.Repeat("x", 2*throttle.MaxKeyLen)
	forEachBackend(t, func(t *testing.T, b backend) {
		h := New(b.newLimiter(t), limit, byHeader).Handler(&okHandler{})
		for _, key := range []string{
			long,
			long + "y", // differs only past the limit
			strings.Repeat("z", throttle.MaxKeyLen-len(DefaultName)-1), // fits exactly
			"{tag}",
			"#hash",
			"line\nbreak",
			"ünïcode",
		} {
			name := key[:min(len(key), 12)]
			first := get(h, "192.0.2.1:1", "K", key)
			require.Equal(t, http.StatusOK, first.Code, name)
			assert.Equal(t, "1", first.Header().Get("X-RateLimit-Remaining"), name)
			second := get(h, "192.0.2.1:1", "K", key)
			require.Equal(t, http.StatusOK, second.Code, name)
			assert.Equal(t, "0", second.Header().Get("X-RateLimit-Remaining"), name)
		}
		rec := get(h, "192.0.2.1:1", "K", "")
		assert.Equal(t, http.StatusBadRequest, rec.Code, "empty key")
		requireNoRateHeaders(t, rec.Header())
	})
}

func TestBucketName(t *testing.T) {
	hashed := "#" + digest("x{y}")
	cases := []struct {
		key, want string
	}{
		{"ip:192.0.2.1", "n:ip:192.0.2.1"},
		{"12345678901234", "n:12345678901234"},                 // 16 bytes: fits
		{"123456789012345", "n:#" + digest("123456789012345")}, // one byte too long
		{"x{y}", "n:" + hashed},
		{hashed, "n:#" + digest(hashed)}, // a hashed-looking key cannot pose as another's hash
		{"tab\there", "n:#" + digest("tab\there")},
	}
	for i, c := range cases {
		got, err := bucketName("n", c.key, 16)
		require.NoError(t, err, "case %d", i)
		assert.Equal(t, c.want, got, "case %d", i)
	}
	_, err := bucketName("n", "", 16)
	assert.ErrorIs(t, err, ErrNoKey)
	long, err := bucketName(strings.Repeat("n", maxPolicyNameSize), strings.Repeat("k", 2*throttle.MaxKeyLen), throttle.MaxKeyLen)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(long), throttle.MaxKeyLen, "the longest name and a hashed key fit")
}

func TestCost(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clk := newClock()
		h := New(b.newLimiter(t, throttle.WithClock(clk)), threePerMinute, WithCost(2)).Handler(&okHandler{})
		rec := get(h, "192.0.2.1:1")
		require.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, `"default";r=1;t=40`, rec.Header().Get("RateLimit"))
		rec = get(h, "192.0.2.1:1")
		require.Equal(t, http.StatusTooManyRequests, rec.Code)
		assert.Equal(t, "20", rec.Header().Get("Retry-After")) // one more token: 20 s
		assert.Equal(t, `"default";r=1;t=20`, rec.Header().Get("RateLimit"))
	})
}

func TestMisconfigured(t *testing.T) {
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	cases := []struct {
		name string
		m    *Middleware
	}{
		{"nil limiter", New(nil, threePerMinute)},
		{"limiter error", New(throttle.NewLimiter(nil), threePerMinute)},
		{"nil policy", New(lim, nil)},
		{"invalid policy", New(lim, throttle.Limit{})},
		{"cost 0", New(lim, threePerMinute, WithCost(0))},
		{"cost over quota", New(lim, threePerMinute, WithCost(4))},
		{"empty name", New(lim, threePerMinute, WithName(""))},
		{"braces in name", New(lim, threePerMinute, WithName("{x}"))},
		{"colon in name", New(lim, threePerMinute, WithName("a:b"))},
		{"control in name", New(lim, threePerMinute, WithName("a\nb"))},
		{"non-ASCII name", New(lim, threePerMinute, WithName("café"))},
		{"long name", New(lim, threePerMinute, WithName(strings.Repeat("n", maxPolicyNameSize+1)))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.ErrorIs(t, c.m.Err(), throttle.ErrInvalid)
			next := &okHandler{}
			rec := get(c.m.Handler(next), "192.0.2.1:1")
			assert.Equal(t, http.StatusInternalServerError, rec.Code)
			assert.Equal(t, 0, next.served())
			requireNoRateHeaders(t, rec.Header())
		})
	}
}

func TestQuotedName(t *testing.T) {
	m := New(throttle.NewLimiter(throttle.NewMemoryStore()), threePerMinute, WithName(`a "b" \c`))
	require.NoError(t, m.Err())
	rec := get(m.Handler(&okHandler{}), "192.0.2.1:1")
	assert.Equal(t, `"a \"b\" \\c";q=3;w=60`, rec.Header().Get("RateLimit-Policy"))
}

func TestKeyErrors(t *testing.T) {
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	boom := errors.New("boom")
	cases := []struct {
		name string
		key  KeyFunc
		code int
	}{
		{"no key", ByHeader("X-API-Key"), http.StatusBadRequest},
		{"key function fails", func(*http.Request) (string, error) { return "", boom }, http.StatusInternalServerError},
		{"empty key", func(*http.Request) (string, error) { return "", nil }, http.StatusBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next := &okHandler{}
			rec := get(New(lim, threePerMinute, WithKey(c.key)).Handler(next), "192.0.2.1:1")
			assert.Equal(t, c.code, rec.Code)
			assert.Equal(t, 0, next.served())
			requireNoRateHeaders(t, rec.Header())
		})
	}
	// A Unix-socket peer has no address for ByIP.
	rec := get(New(lim, threePerMinute).Handler(&okHandler{}), "@")
	assert.Equal(t, http.StatusInternalServerError, rec.Code)
}

func TestErrorHandler(t *testing.T) {
	var got error
	m := New(throttle.NewLimiter(throttle.NewMemoryStore()), threePerMinute,
		WithKey(ByHeader("X-API-Key")),
		WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			got = err
			http.Error(w, "who are you?", http.StatusUnauthorized)
		}))
	rec := get(m.Handler(&okHandler{}), "192.0.2.1:1")
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	assert.ErrorIs(t, got, ErrNoKey)
}

func TestDenyHandler(t *testing.T) {
	limit := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	var retryAfter string
	m := New(throttle.NewLimiter(throttle.NewMemoryStore()), limit,
		WithDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			retryAfter = w.Header().Get("Retry-After")
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"title":"slow down"}`))
		})))
	h := m.Handler(&okHandler{})
	require.Equal(t, http.StatusOK, get(h, "192.0.2.1:1").Code)
	rec := get(h, "192.0.2.1:1")
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	assert.NotEmpty(t, retryAfter, "headers are set before the deny handler runs")
	assert.Equal(t, retryAfter, rec.Header().Get("Retry-After"))
}

func TestExempt(t *testing.T) {
	limit := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	next := &okHandler{}
	h := New(throttle.NewLimiter(throttle.NewMemoryStore()), limit,
		WithExempt(func(r *http.Request) bool { return r.URL.Path == "/healthz" })).Handler(next)
	for range 3 {
		req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusOK, rec.Code)
		requireNoRateHeaders(t, rec.Header())
	}
	assert.Equal(t, http.StatusOK, get(h, "192.0.2.1:1").Code, "exempt requests took no token")
	assert.Equal(t, 4, next.served())
}

func TestNilNext(t *testing.T) {
	h := New(throttle.NewLimiter(throttle.NewMemoryStore()), threePerMinute).Handler(nil)
	assert.Equal(t, http.StatusNotFound, get(h, "192.0.2.1:1").Code)
}

// TestOverTheWire checks that the fields reach a real client unchanged.
func TestOverTheWire(t *testing.T) {
	srv := httptest.NewServer(New(throttle.NewLimiter(throttle.NewMemoryStore()), threePerMinute).Handler(&okHandler{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, `"default";q=3;w=60`, resp.Header.Get("RateLimit-Policy"))
	assert.Equal(t, "2", resp.Header.Get("X-RateLimit-Remaining"))
	assert.Regexp(t, `^"default";r=2;t=\d+$`, resp.Header.Get("RateLimit"))
}

func TestNested(t *testing.T) {
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	global := New(lim, throttle.Limit{Rate: 100, Period: time.Minute, Burst: 100}, WithName("global"), WithKey(func(*http.Request) (string, error) { return "all", nil }))
	perClient := New(lim, threePerMinute, WithName("client"))
	rec := get(global.Handler(perClient.Handler(&okHandler{})), "192.0.2.1:1")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, []string{`"global";q=100;w=60`, `"client";q=3;w=60`}, rec.Header().Values("RateLimit-Policy"))
	assert.Equal(t, []string{`"global";r=99;t=1`, `"client";r=2;t=20`}, rec.Header().Values("RateLimit"))
	assert.Equal(t, "3", rec.Header().Get("X-RateLimit-Limit"), "the innermost")
}
