package httplimit

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// clock is a throttle.Clock that moves only when told.
type clock struct {
	mu   sync.Mutex
	base time.Time
	now  time.Time
}

func newClock() *clock {
	now := time.Now()
	return &clock{base: now, now: now}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// at sets the clock to d after its start.
func (c *clock) at(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.base.Add(d)
}

// backend makes Limiters over one kind of store; each test's keys are its own.
type backend struct {
	name       string
	newLimiter func(t *testing.T, opts ...throttle.StoreOption) *throttle.Limiter
}

// backends are the memory store and a real redis-server: the Middleware must
// answer the same over both.
var backends = []backend{
	{"memory", func(_ *testing.T, opts ...throttle.StoreOption) *throttle.Limiter {
		return throttle.NewLimiter(throttle.NewMemoryStore(opts...))
	}},
	{"redis", func(t *testing.T, opts ...throttle.StoreOption) *throttle.Limiter {
		store := throttle.NewRedisStore(redistest.Shared(t).Client(t), opts...)
		t.Cleanup(func() { _ = store.Close() })
		return throttle.NewLimiter(store, throttle.WithKeyPrefix(redistest.Prefix(t)))
	}},
}

// forEachBackend runs f as a subtest over each backend.
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// okHandler is a handler that answers 200 "ok" and counts its calls.
type okHandler struct {
	mu    sync.Mutex
	calls int
}

func (h *okHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	_, _ = w.Write([]byte("ok"))
}

func (h *okHandler) served() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// get sends GET / from remote (host:port) through h.
func get(h http.Handler, remote string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// rateHeaders are the header fields a limited response carries.
var rateHeaders = []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit", "RateLimit-Policy"}

// requireNoRateHeaders fails unless h has none of the rate-limit fields nor Retry-After.
func requireNoRateHeaders(t *testing.T, h http.Header) {
	t.Helper()
	for _, name := range append(rateHeaders, "Retry-After") {
		require.Empty(t, h.Values(name), name)
	}
}
