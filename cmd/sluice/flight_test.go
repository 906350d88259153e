package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/cli"
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
