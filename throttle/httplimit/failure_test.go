package httplimit

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// deadLimiter is a Limiter over a RedisStore whose server has stopped.
func deadLimiter(t *testing.T) *throttle.Limiter {
	srv := redistest.Start(t)
	addr := srv.Addr()
	srv.Stop()
	rdb := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		DialerRetries: 1, DialerRetryTimeout: time.Millisecond, ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	store := throttle.NewRedisStore(rdb)
	t.Cleanup(func() { _ = store.Close() })
	return throttle.NewLimiter(store, throttle.WithKeyPrefix(redistest.Prefix(t)))
}

func TestStoreDownFailsClosed(t *testing.T) {
	next := &okHandler{}
	h := New(deadLimiter(t), threePerMinute).Handler(next)
	rec := get(h, "192.0.2.1:1")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "5", rec.Header().Get("Retry-After"))
	for _, name := range rateHeaders {
		assert.Empty(t, rec.Header().Values(name), name)
	}
	assert.Equal(t, 0, next.served())
}

func TestStoreDownFailsOpen(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })

	next := &okHandler{}
	h := New(deadLimiter(t), threePerMinute, WithFailOpen(), WithName("open"), WithMeterProvider(mp)).Handler(next)
	for range 2 {
		rec := get(h, "192.0.2.1:1")
		assert.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, "ok", rec.Body.String())
		requireNoRateHeaders(t, rec.Header())
	}
	assert.Equal(t, 2, next.served())
	assert.Equal(t, map[string]int64{"fail_open": 2}, countsByOutcome(t, reader))
}

func TestStoreRefusedFailsClosedEvenOpen(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "secret")
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: "wrong", MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	store := throttle.NewRedisStore(rdb)
	t.Cleanup(func() { _ = store.Close() })
	next := &okHandler{}
	h := New(throttle.NewLimiter(store), threePerMinute, WithFailOpen()).Handler(next)
	rec := get(h, "192.0.2.1:1")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, 0, next.served())
}

func TestOutcomesCounted(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })

	limit := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	h := New(throttle.NewLimiter(throttle.NewMemoryStore()), limit, WithMeterProvider(mp),
		WithKey(FirstOf(ByHeader("K"), ByIP))).Handler(&okHandler{})
	get(h, "192.0.2.1:1")
	get(h, "192.0.2.1:1")
	get(h, "@") // no address: an error
	assert.Equal(t, map[string]int64{"allowed": 1, "limited": 1, "error": 1}, countsByOutcome(t, reader))
}

// countsByOutcome reads sluice.httplimit.requests by sluice.outcome.
func countsByOutcome(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != scope {
			continue
		}
		for _, m := range sm.Metrics {
			if m.Name != "sluice.httplimit.requests" {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok)
			for _, dp := range sum.DataPoints {
				o, _ := dp.Attributes.Value("sluice.outcome")
				got[o.AsString()] += dp.Value
			}
		}
	}
	return got
}
