package main

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

func TestRates(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	r := newRates(t0)
	nop := asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })
	fast := r.counted(nop, &workers.Policy{Name: "http:request", Limit: throttle.Limit{Rate: 50, Burst: 5}})
	slow := r.counted(nop, &workers.Policy{Name: "email:send", Limit: throttle.Limit{Rate: 100, Period: time.Minute, Burst: 10}})
	odd := r.counted(nop, &workers.Policy{Name: "odd", Limit: throttle.Limit{Rate: 0.5, Burst: 1}})

	runs := func(h asynq.Handler, n int) {
		for range n {
			require.NoError(t, h.ProcessTask(context.Background(), asynq.NewTask("x", nil)))
		}
	}
	steps := []struct {
		fast, slow, odd int
		at              time.Duration // since t0
		want            string
	}{
		{0, 0, 0, 0, "http:request 0.0/s of 50/s, email:send 0.0/m of 100/m, odd 0.0/s of 0.5/s"},
		{100, 3, 1, 2 * time.Second, "http:request 50.0/s of 50/s, email:send 90.0/m of 100/m, odd 0.5/s of 0.5/s"},
		{99, 0, 0, 4 * time.Second, "http:request 49.5/s of 50/s, email:send 0.0/m of 100/m, odd 0.0/s of 0.5/s"},
	}
	for i, s := range steps {
		runs(fast, s.fast)
		runs(slow, s.slow)
		runs(odd, s.odd)
		assert.Equal(t, s.want, r.snapshot(t0.Add(s.at)), "step %d", i)
	}
	assert.Equal(t, "http:request 49.8/s of 50/s, email:send 45.0/m of 100/m, odd 0.2/s of 0.5/s", r.total(t0.Add(4*time.Second)))
	assert.Equal(t, "", newRates(t0).snapshot(t0), "no limits, no rates")

	// A limit per key: the runs are over all keys, so they are not "of" it.
	key, err := workers.KeyTemplate("{payload.tenant}")
	require.NoError(t, err)
	r = newRates(t0)
	perTenant := r.counted(nop, &workers.Policy{Name: "export", Limit: throttle.Limit{Rate: 50, Burst: 5}, Key: key})
	runs(perTenant, 240)
	assert.Equal(t, "export 120.0/s over all keys, 50/s per key", r.snapshot(t0.Add(2*time.Second)))
}

func TestStatusAttrs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	s := workers.Stats{Processed: 7, Failed: 1, Requeued: 3, Cooldowns: 2, Archived: 1, Waiting: 4, WaitingByPriority: [5]int64{1, 0, 3, 0, 0}}
	log.LogAttrs(context.Background(), slog.LevelInfo, "worker stopped", statusAttrs(s, "sleep 1.0/s of 2/s", "shared")...)
	log.LogAttrs(context.Background(), slog.LevelInfo, "worker status", statusAttrs(workers.Stats{}, "", "fallback")...)
	assert.Equal(t, `level=INFO msg="worker stopped" processed=7 failed=1 requeued=3 cooldowns=2 archived=1 waiting=4 waiting_by_priority="p1=1 p3=3" rates="sleep 1.0/s of 2/s" limiter=shared
level=INFO msg="worker status" processed=0 failed=0 requeued=0 cooldowns=0 archived=0 waiting=0 limiter=fallback
`, buf.String())
}

// A limit per key with a global limit that adapts: the status line shows
// the global bucket's effective rate, which the upstream's answers set,
// once it has moved from the ceiling; with adapt=key (AdaptKey) there is no
// one rate to show.
func TestRatesShowTheGlobalEffectiveRate(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	key, err := workers.KeyTemplate("{payload.tenant}")
	require.NoError(t, err)
	global := throttle.Limit{Rate: 100, Burst: 10}
	r := newRates(t0)
	nop := asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })
	pol := workers.Policy{Name: "export", Limit: throttle.Limit{Rate: 50, Burst: 5}, Key: key, Global: &global, Adapt: true}
	r.counted(nop, &pol)
	own := pol
	own.Name, own.AdaptKey = "own", true
	r.counted(nop, &own)
	ws := r.adaptives()
	require.Len(t, ws, 1, "the global bucket of export; own adapts each key's")
	assert.Equal(t, workers.GlobalKey(pol), ws[0].bucket)
	assert.Equal(t, global, ws[0].a.Ceiling)

	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	_, _, err = lim.Refused(context.Background(), ws[0].bucket, ws[0].a)
	require.NoError(t, err)
	r.readAdaptive(context.Background(), lim)
	assert.Equal(t, "export 0.0/s over all keys, 50/s per key, global 60.0/s (ceiling 100/s, 429), own 0.0/s over all keys, 50/s per key",
		r.snapshot(t0.Add(time.Second)))
}
