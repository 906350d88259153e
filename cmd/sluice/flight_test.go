package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/browsertest"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// sluice limits shows an automatic in-flight bound (in-flight=auto): the
// bound, its floor and ceiling, the slots held and its latencies.
func TestLimitsShowsInFlightAuto(t *testing.T) {
	srv := redistest.Start(t)
	r := runArgs("set", "db=100/s,in-flight=auto:2-50", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "in-flight=auto:2-50")

	lim := throttle.NewLimiter(throttle.NewRedisStore(srv.Client(t)))
	lease, err := lim.Hold(context.Background(), "db:inflight", throttle.Concurrency{Max: 50, Floor: 2, Auto: true})
	require.NoError(t, err)
	defer lease.Release(context.Background())

	r = runArgs("limits", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "db: in flight 2 of auto 2-50 (learned 2.0): 1 held, baseline 0.0ms, recent 0.0ms, cold")

	r = runArgs("limits", "--redis", srv.URL(), "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var views []limitView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
	require.Len(t, views, 1)
	require.NotNil(t, views[0].InFlight)
	assert.Equal(t, flightView{Bound: 2, Limit: 2, Held: 1, Floor: 2, Ceiling: 50, Why: "cold"}, *views[0].InFlight)
}

// The dashboard draws an automatic in-flight bound beside the type's rate.
func TestDashboardShowsInFlightAuto(t *testing.T) {
	chrome := browsertest.Path(t)
	hs, f := newDashboard(t, "")
	require.NoError(t, f.ctl.Beat(context.Background(), control.Heartbeat{
		ID: "w2:43:1", Host: "worker-two", PID: 43, Mode: "shared", Seen: time.Now(), Queues: []string{"default"},
		Limits: []control.LimitState{{Type: "db", Spec: "db=100/s,burst=100,in-flight=auto:2-50", Source: "flag"}},
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := dumpDOM(ctx, t, hs.URL+"/", 1200)
	require.NoError(t, err, "%s --dump-dom", chrome)
	assert.Contains(t, string(out), `<div class="inflight"><dt>in flight</dt><dd>0 of 2 (auto 2-50, baseline 0.0 ms, recent 0.0 ms, cold)</dd></div>`)
}
