package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestMain lets the test binary stand in for load as the hot-key
// experiments' child (hot.go runs os.Executable with --child).
func TestMain(m *testing.M) {
	for _, a := range os.Args[1:] {
		if a == "--child" {
			ctx := context.Background()
			os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
		}
	}
	redistest.Main(m)
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--only", "everything"},
		{"--hot-rate", "2e6"},
		{"--hot-workers", "0"},
		{"--cost-duration", "0s"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		assert.Equal(t, 2, code, "%v: %s", args, errb.String())
		assert.NotEmpty(t, errb.String(), "%v says why", args)
	}
}

// Grants beyond Burst + Rate·t are counted over both processes' bins.
func TestMergeCountsOverGrants(t *testing.T) {
	c := config{hotRate: 1000, hotBurst: 10, hotFor: time.Second}
	a := hotResult{Grants: 12, Trips: 2, Bins: []int64{6, 1, 0}}
	b := hotResult{Grants: 6, Trips: 1, Bins: []int64{6, 0, 0}}
	f := merge(c, a, b)
	assert.Equal(t, int64(1), f.over, "12 by the end of the first ms, where 11 may be")
	assert.InDelta(t, 3.0/18, f.tripsPerGrant, 1e-9)
	f = merge(c, hotResult{Bins: []int64{5, 1}}, hotResult{Bins: []int64{6}})
	assert.Zero(t, f.over)
}

// The hot-key, server-cost and pool groups run end to end against a real Redis,
// with a child process, and print their rows (their figures are not
// judged here: speed is the load command's to report, not a test's).
func TestHotAndCostRun(t *testing.T) {
	srv := redistest.Start(t)
	for _, only := range []string{"hot", "cost", "pool"} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"--redis", srv.URL(), "--only", only,
			"--hot-duration", "300ms", "--hot-workers", "4", "--hot-rate", "2000", "--hot-burst", "20",
			"--cost-duration", "100ms", "--tryers", "4", "--pool-jobs", "200", "--pool-concurrency", "4"}, &out, &errb)
		require.Equal(t, 0, code, errb.String())
		switch only {
		case "hot":
			assert.Contains(t, out.String(), "hot key: round trips per grant")
			found := false
			for _, line := range strings.Split(out.String(), "\n") {
				if strings.HasPrefix(line, "hot key: most grants beyond") {
					found = true
					assert.Regexp(t, `both processes\s+0\s+\d+ \(redis_rate\), 0 \(uncoalesced\)`, line, "no process pair over-grants")
				}
			}
			assert.True(t, found, "the over-grant row is printed")
		case "cost":
			for _, p := range costPolicies {
				assert.Contains(t, out.String(), "server µs per decision, "+p.name)
			}
			assert.Contains(t, out.String(), "redis_rate Allow against itself")
		case "pool":
			assert.Contains(t, out.String(), "no-op jobs/s through a workers.Pool")
			assert.Contains(t, out.String(), "limiter in process")
			assert.Contains(t, out.String(), "the same with throttle.WithPrefetch(4)")
		}
	}
}
