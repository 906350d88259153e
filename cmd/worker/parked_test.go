package main

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// The status line counts a calendar quota's runs, and says how many of its
// jobs are parked until when, in the quota's zone.
func TestStatusParked(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	la, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err)
	pool, err := workers.NewPool(workers.Config{
		Redis:   asynq.RedisClientOpt{Addr: srv.Addr()},
		Limiter: throttle.NewLimiter(throttle.NewRedisStore(rdb)),
		Queues:  map[string]int{"default": 1},
	})
	require.NoError(t, err)
	t.Cleanup(func() { // a pool never started closes its clients
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, pool.Shutdown(ctx))
	})
	t0 := time.Now()
	r := newRates(t0)
	nop := asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })
	h := r.counted(nop, &workers.Policy{Name: "api", Limits: []workers.NamedLimit{
		{Name: "second", Limit: throttle.Limit{Rate: 3, Burst: 3}},
		{Name: "day", Limit: throttle.FixedWindow{Max: 2000, Calendar: "day", Zone: la}},
	}})
	require.NoError(t, h.ProcessTask(context.Background(), asynq.NewTask("api", nil)))
	day := time.Now().In(la).Add(24 * time.Hour)
	midnight := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, la)
	for _, id := range []string{"a~1", "b~1"} {
		require.NoError(t, rdb.ZAdd(context.Background(), "sluice:parked:{api}", redis.Z{Score: float64(midnight.UnixMilli()), Member: id}).Err())
	}
	r.readParked(context.Background(), pool)
	assert.Equal(t, "api 1.0/s of 3/s, 2 parked until 00:00 America/Los_Angeles", r.snapshot(t0.Add(time.Second)))

	r = newRates(t0)
	h = r.counted(nop, &workers.Policy{Name: "api", Limit: throttle.FixedWindow{Max: 2000, Calendar: "day", Zone: la}})
	require.NoError(t, h.ProcessTask(context.Background(), asynq.NewTask("api", nil)))
	r.readParked(context.Background(), pool)
	assert.Equal(t, "api 1 runs, of 2000/day, 2 parked until 00:00 America/Los_Angeles", r.snapshot(t0.Add(time.Second)))

	key, err := workers.KeyTemplate("{payload.tenant}")
	require.NoError(t, err)
	r = newRates(t0)
	h = r.counted(nop, &workers.Policy{Name: "api", Key: key, Limit: throttle.FixedWindow{Max: 20, Calendar: "week"}})
	require.NoError(t, h.ProcessTask(context.Background(), asynq.NewTask("api", []byte(`{"tenant": "x"}`))))
	assert.Equal(t, "api 1 runs over all keys, 20/week per key", r.snapshot(t0.Add(time.Second)))
}
