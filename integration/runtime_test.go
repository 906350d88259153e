package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestRuntimeLimits runs two built workers with --limit 'sleep=100/s' and
// changes the limit with the built sluice command: both workers apply
// `sluice set 'sleep=2/s,burst=1'` (the change reaches them by pub/sub), jobs
// then run at 2/s, `sluice limits` and `sluice workers` show the runtime
// source, and `sluice unset` brings the flag's limit back.
func TestRuntimeLimits(t *testing.T) {
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	fleet := startFleet(t, srv, insp, 2, "--concurrency", "4", "--limit", "sleep=100/s")
	sluice := func(args ...string) string {
		t.Helper()
		code, out := runCommand(t, 10*time.Second, bin.sluice, append(args, "--redis", srv.URL(), "--key-prefix", keyPrefix)...)
		require.Equal(t, 0, code, "sluice %s:\n%s", strings.Join(args, " "), out)
		return out
	}
	applied := func(msg string) func() bool {
		return func() bool {
			for _, w := range fleet {
				if _, ok := findLog(w, func(e logEntry) bool { return e.Msg == msg }); !ok {
					return false
				}
			}
			return true
		}
	}

	set := time.Now()
	sluice("set", "sleep=2/s,burst=1")
	require.Eventually(t, applied("limit changed at runtime"), 10*time.Second, 10*time.Millisecond, "both workers apply it")
	var latest time.Duration
	for _, w := range fleet {
		e, _ := findLog(w, func(e logEntry) bool { return e.Msg == "limit changed at runtime" })
		latest = max(latest, e.Time.Sub(set))
		assert.Equal(t, "sleep=2/s,burst=1", e.Fields["spec"])
		assert.Contains(t, e.Fields["set_by"], "@", "who set it")
	}
	t.Logf("both workers applied the runtime limit %v after sluice set began", latest.Round(time.Millisecond))

	start := time.Now()
	enqueue(t, srv.URL(), "--type", "sleep", "--payload", `{"ms": 1}`, "--count", "7")
	waitDrained(t, insp, 30*time.Second)
	took := time.Since(start)
	t.Logf("7 jobs under 2/s burst 1 took %v (3 s at least)", took.Round(time.Millisecond))
	assert.GreaterOrEqual(t, took, 2900*time.Millisecond, "the runtime limit, not the flag's 100/s, paced them")

	var views []struct {
		Type, Spec, Source string
		Workers            int
	}
	require.Eventually(t, func() bool { // the heartbeats come every 5 s
		require.NoError(t, json.Unmarshal([]byte(sluice("limits", "--json")), &views))
		return len(views) == 1 && views[0].Workers == 2
	}, 15*time.Second, 200*time.Millisecond)
	assert.Equal(t, "sleep=2/s,burst=1", views[0].Spec)
	assert.Equal(t, "runtime", views[0].Source)
	assert.Contains(t, sluice("workers"), "sleep=2/s,burst=1 (runtime)")

	sluice("unset", "sleep")
	require.Eventually(t, applied("runtime limit unset: the worker's own limit applies again"), 10*time.Second, 10*time.Millisecond)

	// A change whose message was missed (written without a publish) reaches
	// the workers by their periodic read, within its 5 s.
	missed := time.Now()
	require.NoError(t, srv.Client(t).HSet(context.Background(), keyPrefix+"{ctl}:limits", "sleep",
		`{"spec": "sleep=3/s", "by": "test@here", "at": "2026-11-25T00:00:00Z"}`).Err())
	require.Eventually(t, func() bool {
		for _, w := range fleet {
			if _, ok := findLog(w, func(e logEntry) bool { return e.Msg == "limit changed at runtime" && e.Fields["spec"] == "sleep=3/s" }); !ok {
				return false
			}
		}
		return true
	}, 15*time.Second, 50*time.Millisecond, "the poll backstop")
	t.Logf("a change without its message applied %v later", time.Since(missed).Round(time.Millisecond))
	stats := stopFleet(t, fleet, stopTimeout)
	assert.Equal(t, int64(7), stats.Processed)
}
