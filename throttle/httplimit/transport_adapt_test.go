package httplimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// gcraAPI is an API that allows rate per second with burst, answering 429
// with Retry-After: 1 beyond it, and counts its answers.
type gcraAPI struct {
	mu       sync.Mutex
	tat      time.Time
	interval time.Duration
	burst    int
	ok, no   atomic.Int64
}

func (a *gcraAPI) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	now := time.Now()
	tat := a.tat
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(a.interval)
	allowed := next.Sub(now) <= time.Duration(a.burst)*a.interval
	if allowed {
		a.tat = next
	}
	a.mu.Unlock()
	if !allowed {
		a.no.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	a.ok.Add(1)
}

// Two Transports in two "processes" (their own Limiter and Redis client) on
// one Redis share one adaptive bucket: configured at 80/s before an API that
// allows 50/s, they learn the lower rate together, and the refusals stay few.
func TestTransportsAdaptTogether(t *testing.T) {
	srv := redistest.Shared(t)
	prefix := redistest.Prefix(t)
	api := &gcraAPI{interval: 20 * time.Millisecond, burst: 5}
	up := httptest.NewServer(api)
	defer up.Close()
	adapt := &throttle.Adaptive{Ceiling: throttle.Limit{Rate: 80, Period: time.Second, Burst: 8}}
	var trs []*Transport
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		lim := throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix(prefix))
		trs = append(trs, &Transport{Base: up.Client().Transport, Limiter: lim, Adapt: adapt, Retries: 3})
	}

	const requests = 200
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: trs[g%2]}
			for next.Add(1) <= requests {
				for {
					resp, err := c.Get(up.URL)
					if !assert.NoError(t, err) {
						return
					}
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	ideal := time.Duration(float64(requests-5) / 50 * float64(time.Second))
	t.Logf("%d requests in %v (ideal %v); %d answered 429", requests, took.Round(time.Millisecond), ideal, api.no.Load())

	assert.Equal(t, int64(requests), api.ok.Load())
	assert.LessOrEqual(t, api.no.Load(), int64(requests/10), "few refusals")
	_, st, err := trs[0].Limiter.AdaptiveLimit(context.Background(), up.Listener.Addr().String(), *adapt)
	require.NoError(t, err)
	assert.Less(t, st.Rate, 80.0, "the shared effective rate came down from the ceiling")
	assert.Less(t, took, 2*ideal, "loosely: the fleet did not stall")
}
