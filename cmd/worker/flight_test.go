package main

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// An automatic in-flight bound shows in the status line and as gauges: the
// bound, the slots held, and its latencies; a policy with a key per tenant
// (a bound per key) is left out.
func TestFlightStatusAndGauges(t *testing.T) {
	ctx := context.Background()
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	t0 := time.Now()
	r := newRates(t0)
	nop := asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })
	pol := workers.Policy{Name: "db", Limit: throttle.Limit{Rate: 50, Burst: 5}, InFlight: 40, InFlightAuto: true, InFlightFloor: 2}
	r.counted(nop, &pol)
	key, err := workers.KeyTemplate("{payload.tenant}")
	require.NoError(t, err)
	r.counted(nop, &workers.Policy{Name: "keyed", Limit: throttle.Limit{Rate: 50, Burst: 5}, Key: key, InFlightAuto: true})

	semKey, c := workers.InFlightOf(pol)
	lease, err := lim.Hold(ctx, semKey, c)
	require.NoError(t, err)
	defer lease.Release(ctx)

	r.readFlight(ctx, lim)
	assert.Equal(t, "db 0.0/s of 50/s, in flight 2 of auto 2-40: 1 held, baseline 0s, recent 0s, cold, keyed 0.0/s over all keys, 50/s per key",
		r.snapshot(t0.Add(time.Second)))

	reader := sdkmetric.NewManualReader()
	require.NoError(t, observeFlight(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), lim, r))
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok {
				for _, dp := range g.DataPoints {
					got[m.Name] = dp.Value
					p, _ := dp.Attributes.Value("sluice.policy")
					assert.Equal(t, "db", p.AsString(), "only the policy with one bound")
				}
			}
		}
	}
	assert.Equal(t, map[string]int64{"sluice.throttle.inflight.bound": 2, "sluice.throttle.inflight.held": 1}, got)
}
