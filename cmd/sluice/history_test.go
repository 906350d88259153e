package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/internal/limitspec"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// A type's first row carries its ring (the steps the workers wrote) and
// each tenant's longest wait; the per-key template's capacity counts the
// tenants with work; inspect TYPE prints the last steps and the waits.
func TestHistoryAndWaits(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client(t)
	spec := "http:request=50/s,burst=5,key=tenant:{header.sluice-key},global=60/s:6"
	require.NoError(t, control.New(rdb, "sluice:").Beat(ctx, control.Heartbeat{
		ID: "w1:42:1", Host: "w1", PID: 42, Mode: "shared", Seen: time.Now(),
		Limits: []control.LimitState{{Type: "http:request", Spec: spec, Source: "flag", Grants: 12, Waiting: 4}},
	}))
	sp, err := limitspec.Parse(spec)
	require.NoError(t, err)
	lim := throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix("sluice:"))
	for range 8 { // acme books turns ahead on the global bucket
		_, err := lim.ReserveAll(ctx, []throttle.Bucket{
			{Key: workers.GlobalKey(sp.Policy), Limit: sp.Global, Share: &throttle.Share{Tenant: "tenant:acme", Weight: 1}},
		}, time.Minute)
		if err != nil {
			require.ErrorIs(t, err, throttle.ErrOverShare)
		}
	}
	ring := history.NewRing(rdb, "sluice:", 30*time.Second)
	now := time.Now()
	for i, g := range []float64{300, 600} {
		require.NoError(t, ring.Add(ctx, "http:request", history.Point{At: now.Add(time.Duration(i-1) * 30 * time.Second),
			Grants: g, Refused: float64(3 * i), Waiting: 4, Queued: 120, Limit: 50, Workers: 1}))
	}
	require.NoError(t, ring.AddWaits(ctx, "http:request", now, map[string]time.Duration{"tenant:acme": 42 * time.Second}))

	r := runArgs("--redis", srv.URL(), "inspect", "http:request", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var x typeFacts
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &x))
	require.Len(t, x.Limits, 1)
	v := x.Limits[0]
	require.NotNil(t, v.History)
	assert.InDelta(t, 30, v.History.StepS, 0)
	require.Len(t, v.History.Points, 2)
	assert.InDelta(t, 600, v.History.Points[1].Grants, 0)
	require.Len(t, v.Tenants, 1)
	assert.Equal(t, "tenant:acme", v.Tenants[0].Key)
	assert.InDelta(t, 42, v.Tenants[0].LongestWaitS, 0.001)
	assert.InDelta(t, 50, v.Buckets[0].CapacityPerS, 1e-9, "50/s per key, one key with work")
	assert.Equal(t, "per key tenant:{header.sluice-key}", v.Binding, "50/s for one key, under the global 60/s")

	r = runArgs("--redis", srv.URL(), "inspect", "http:request")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `tenant:acme\s+3\s+100%\s+1\s+\d+\s+\S+\s+42s`, r.stdout, "the tenant's longest wait")
	assert.Contains(t, r.stdout, "history, the last 2 steps of 30s:")
	assert.Regexp(t, `\d\d:\d\d:\d\d\s+20\.0\s+3\s+4\s+120`, r.stdout, "600 grants in 30 s: 20.0/s")
}

// A key template without fair shares has no bucket that knows its keys'
// shares: the type lists the keys whose jobs waited longest (from the
// workers' waits), longest first, with no share or weight, in the JSON and
// in inspect TYPE.
func TestWaitedKeysWithoutFairShares(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client(t)
	spec := "http:request=50/s,burst=5,key=tenant:{header.sluice-key}"
	require.NoError(t, control.New(rdb, "sluice:").Beat(ctx, control.Heartbeat{
		ID: "w1:42:1", Host: "w1", PID: 42, Mode: "shared", Seen: time.Now(),
		Limits: []control.LimitState{{Type: "http:request", Spec: spec, Source: "flag", Grants: 12, Waiting: 4}},
	}))
	ring := history.NewRing(rdb, "sluice:", 30*time.Second)
	require.NoError(t, ring.AddWaits(ctx, "http:request", time.Now(),
		map[string]time.Duration{"tenant:slow": 42 * time.Second, "tenant:fast": 3 * time.Second}))

	r := runArgs("--redis", srv.URL(), "inspect", "http:request", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var x typeFacts
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &x))
	require.Len(t, x.Limits, 1)
	v := x.Limits[0]
	require.Len(t, v.Tenants, 2)
	assert.Equal(t, "tenant:slow", v.Tenants[0].Key, "longest first")
	assert.InDelta(t, 42, v.Tenants[0].LongestWaitS, 0.001)
	assert.Equal(t, 0, v.Tenants[0].Weight, "no fair share")
	assert.Equal(t, "tenant:fast", v.Tenants[1].Key)
	assert.Zero(t, v.TenantCount, "no key is known to share a bucket")

	r = runArgs("--redis", srv.URL(), "inspect", "http:request")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "keys whose jobs waited longest over the last 5m0s:")
	assert.Regexp(t, `tenant:slow\s+42s`, r.stdout)
	assert.NotContains(t, r.stdout, "tenants with turns ahead")
}
