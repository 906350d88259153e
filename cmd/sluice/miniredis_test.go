package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/limitspec"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// The facts read the same from miniredis (the examples' embedded Redis):
// what binds and why, and an archived job of the workers' queue.
func TestFactsOnMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	spec := "http:request=50/s,burst=5,key=tenant:{header.sluice-key},global=60/s:6"
	require.NoError(t, control.New(rdb, "sluice:").Beat(ctx, control.Heartbeat{
		ID: "w1:42:1", Host: "w1", PID: 42, Mode: "shared", Seen: time.Now(), Queues: []string{"default"},
		Limits: []control.LimitState{{Type: "http:request", Spec: spec, Source: "flag", Grants: 39.8}},
	}))
	sp, err := limitspec.Parse(spec)
	require.NoError(t, err)
	lim := throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix("sluice:"))
	_, _, err = lim.Announced(ctx, workers.GlobalKey(sp.Policy), throttle.Adaptive{Ceiling: throttle.Limit{Rate: 60, Period: time.Second, Burst: 6}}, 40)
	require.NoError(t, err)
	member := queue.Family("default")[2]
	info, err := asynq.NewClientFromRedisClient(rdb).Enqueue(asynq.NewTask("http:request", nil), asynq.Queue(member))
	require.NoError(t, err)
	require.NoError(t, asynq.NewInspectorFromRedisClient(rdb).ArchiveTask(member, info.ID))

	r := runArgs("--redis", "redis://"+mr.Addr(), "inspect", "http:request", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var x typeFacts
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &x))
	require.Len(t, x.Limits, 1)
	assert.Equal(t, "global", x.Limits[0].Binding)
	assert.Regexp(t, `^global binds: announced by the upstream 40/s at \d\d:\d\d UTC; 39.8 grants/s$`, x.Limits[0].Why)
	require.Len(t, x.Archived, 1)
	assert.Equal(t, info.ID, x.Archived[0].ID)
	assert.Equal(t, "default", x.Archived[0].Queue)
}
