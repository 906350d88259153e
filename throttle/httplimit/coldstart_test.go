package httplimit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// shopAPI allows 50/s burst 5 (decided as a request arrives, with two
// requests' time of slack for the scheduling jitter of a loaded machine:
// requests granted in turn may arrive together; the configured burst of 20
// would still pass it by 13) and says only its capacity, Shopify's way
// (X-Shopify-Shop-Api-Call-Limit: USED/5), answering after a delay; it
// records when each request arrived and each answer left.
type shopAPI struct {
	interval time.Duration
	burst    int
	delay    time.Duration
	mu       sync.Mutex
	tat      time.Time
	calls    [][2]time.Time
	refused  int
}

func (a *shopAPI) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	in := time.Now()
	a.mu.Lock()
	tat := a.tat
	if tat.Before(in) {
		tat = in
	}
	next := tat.Add(a.interval)
	allowed := next.Sub(in) <= time.Duration(a.burst+2)*a.interval
	if allowed {
		a.tat = next
	} else {
		a.refused++
	}
	used := min(int(max(a.tat.Sub(in), 0)/a.interval), a.burst)
	a.mu.Unlock()
	w.Header().Set("X-Shopify-Shop-Api-Call-Limit", fmt.Sprintf("%d/%d", used, a.burst))
	time.Sleep(a.delay)
	if !allowed {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	}
	a.mu.Lock()
	a.calls = append(a.calls, [2]time.Time{in, time.Now()})
	a.mu.Unlock()
}

// Two Transports (two processes) configured at 200/s burst 20 on a cold
// adaptive bucket before an API of 50/s burst 5 that announces only its
// capacity: one request goes first, and no other is sent before its
// answer; its capacity sets the rate (50/s burst 5), so that the burst of
// 20 never goes out and no request is refused.
func TestTransportColdStartAsksFirst(t *testing.T) {
	srv := redistest.Shared(t)
	prefix := redistest.Prefix(t)
	api := &shopAPI{interval: 20 * time.Millisecond, burst: 5, delay: 30 * time.Millisecond}
	up := httptest.NewServer(api)
	defer up.Close()
	adapt := &throttle.Adaptive{Ceiling: throttle.Limit{Rate: 200, Period: time.Second, Burst: 20}}
	var trs []*Transport
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		store := throttle.NewRedisStore(rdb)
		t.Cleanup(func() { store.Close() })
		trs = append(trs, &Transport{Base: up.Client().Transport, Limiter: throttle.NewLimiter(store, throttle.WithKeyPrefix(prefix)), Adapt: adapt})
	}

	const requests = 30
	var wg sync.WaitGroup
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := (&http.Client{Transport: trs[i%2]}).Get(up.URL)
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()

	api.mu.Lock()
	defer api.mu.Unlock()
	require.Len(t, api.calls, requests)
	first := api.calls[0]
	for _, c := range api.calls {
		if c[0].Before(first[0]) {
			first = c
		}
	}
	before := 0
	for _, c := range api.calls {
		if c != first && c[0].Before(first[1]) {
			before++
		}
	}
	assert.Zero(t, before, "no request before the first one's answer")
	if !assert.Zero(t, api.refused, "none refused") {
		for _, c := range api.calls {
			t.Logf("in +%v out +%v", c[0].Sub(first[0]), c[1].Sub(first[0]))
		}
	}
	lim, st, err := trs[0].Limiter.AdaptiveLimit(context.Background(), up.Listener.Addr().String(), *adapt)
	require.NoError(t, err)
	assert.Equal(t, "header", st.Reason)
	assert.InDelta(t, 50.0, lim.Rate, 1e-9, "the capacity's rate")
	assert.Equal(t, 5, lim.Burst)
}

// GitHub's 403 with its quota spent, after an answer that said the
// capacity: the bucket waits for the reset, and the rate the capacity set
// is not lowered as a 429 would lower it.
func TestTransportSpentQuotaWaitsWithoutLowering(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	var n int
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n++
		w.Header().Set("X-RateLimit-Limit", "5")
		if n == 1 {
			w.Header().Set("X-RateLimit-Remaining", "4")
			w.Header().Set("X-RateLimit-Reset", "1")
			return
		}
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", "2")
		w.WriteHeader(http.StatusForbidden)
	}))
	defer up.Close()
	adapt := &throttle.Adaptive{Ceiling: throttle.Limit{Rate: 200, Period: time.Second, Burst: 20}}
	lim := throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix(redistest.Prefix(t)))
	c := &http.Client{Transport: &Transport{Base: up.Client().Transport, Limiter: lim, Adapt: adapt}}
	for _, want := range []int{http.StatusOK, http.StatusForbidden} {
		resp, err := c.Get(up.URL)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode)
	}
	ctx := context.Background()
	key := up.Listener.Addr().String()
	l, st, err := lim.AdaptiveLimit(ctx, key, *adapt)
	require.NoError(t, err)
	assert.InDelta(t, 50.0, l.Rate, 1e-9, "the capacity's rate stands")
	assert.Equal(t, "header", st.Reason)
	left, err := lim.CooldownLeft(ctx, key)
	require.NoError(t, err)
	assert.Greater(t, left, time.Second, "held until the reset")
}
