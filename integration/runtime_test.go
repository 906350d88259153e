package integration

import (
	"context"
	"encoding/json"
	"net/http"
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
	// the workers by their periodic read, every 500 ms.
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

// TestRuntimeLimitObeyed is issue #11's acceptance: three built workers at
// http:request=50/s,burst=5 against a lenient upstream; `sluice set
// 'http:request=20/s,burst=2'` holds the upstream's arrivals to 20/s burst 2
// from one second after it (up to the machine's measured scheduling jitter),
// `sluice unset` brings 50/s back, and a worker started after a set applies
// the runtime limit from its start.
func TestRuntimeLimitObeyed(t *testing.T) {
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	probe := startJitterProbe(t)
	up := newUpstream(t, upstreamConfig{})
	fleet := startFleet(t, srv, insp, fleetSize, "--concurrency", concurrency, "--limit", "http:request=50/s,burst=5")
	sluice := func(args ...string) {
		t.Helper()
		code, out := runCommand(t, 10*time.Second, bin.sluice, append(args, "--redis", srv.URL(), "--key-prefix", keyPrefix)...)
		require.Equal(t, 0, code, "sluice %s:\n%s", strings.Join(args, " "), out)
	}
	enqueue(t, srv.URL(), "--type", "http:request", "--count", "800", "--payload", up.Payload(t, "", ""))
	time.Sleep(2 * time.Second)

	probe.Reset()
	set := time.Now()
	sluice("set", "http:request=20/s,burst=2")
	time.Sleep(5 * time.Second)
	unset := time.Now()
	sluice("unset", "http:request")
	time.Sleep(4 * time.Second)

	between := func(from, to time.Time) []time.Time {
		var out []time.Time
		for _, a := range arrivals(up.Requests(), http.StatusOK) {
			if !a.Before(from) && a.Before(to) {
				out = append(out, a)
			}
		}
		return out
	}
	slow := between(set.Add(time.Second), unset)
	worst, _ := excess(slow, 20, 2)
	allowance := float64(probe.Worst()+upstreamJitter)*20/float64(time.Second) + 0.5
	slowRate := float64(len(slow)) / unset.Sub(set.Add(time.Second)).Seconds()
	fast := between(unset.Add(time.Second), unset.Add(4*time.Second))
	fastRate := float64(len(fast)) / 3
	t.Logf("from 1 s after set: %d arrivals, %.1f/s, worst %.2f tokens over 20/s burst 2 (allowance %.2f); from 1 s after unset: %.1f/s; worst scheduling delay %v",
		len(slow), slowRate, worst, allowance, fastRate, probe.Worst())
	assert.LessOrEqual(t, worst, allowance, "the runtime limit holds at the upstream")
	assert.Greater(t, slowRate, 15.0, "and is used")
	assert.Greater(t, fastRate, 40.0, "unset: back toward 50/s")

	// A worker started after a set applies the runtime limit at once.
	sluice("set", "http:request=20/s,burst=2")
	late := startWorker(t, "late", srv.URL(), "--concurrency", "2", "--limit", "http:request=50/s,burst=5")
	require.Eventually(t, func() bool {
		_, ok := findLog(late, func(e logEntry) bool {
			return e.Msg == "limit changed at runtime" && e.Fields["spec"] == "http:request=20/s,burst=2"
		})
		return ok
	}, 15*time.Second, 20*time.Millisecond, "the late worker applies the runtime limit")
	stopFleet(t, append(fleet, late), stopTimeout)
}

// TestRuntimeRaiseReachesJobsSentBack is issue #24's third case: under
// `sluice set 'sleep=2/s,burst=1,max-wait=500ms'` most of 60 jobs go back to
// their queue holding turns half a second apart; a raise to 100/s must bring
// them forward, not leave them due at their old turns (which end about 25 s
// after the raise).
func TestRuntimeRaiseReachesJobsSentBack(t *testing.T) {
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	fleet := startFleet(t, srv, insp, 2, "--concurrency", "4", "--limit", "sleep=100/s")
	sluice := func(args ...string) {
		t.Helper()
		code, out := runCommand(t, 10*time.Second, bin.sluice, append(args, "--redis", srv.URL(), "--key-prefix", keyPrefix)...)
		require.Equal(t, 0, code, "sluice %s:\n%s", strings.Join(args, " "), out)
	}
	sluice("set", "sleep=2/s,burst=1,max-wait=500ms")
	applied := func(spec string) func() bool {
		return func() bool {
			for _, w := range fleet {
				if _, ok := findLog(w, func(e logEntry) bool { return e.Msg == "limit changed at runtime" && e.Fields["spec"] == spec }); !ok {
					return false
				}
			}
			return true
		}
	}
	require.Eventually(t, applied("sleep=2/s,burst=1,max-wait=500ms"), 10*time.Second, 10*time.Millisecond)

	enqueue(t, srv.URL(), "--type", "sleep", "--payload", `{"ms": 1}`, "--count", "60")
	time.Sleep(4500 * time.Millisecond)
	qi := queueInfo(t, insp)
	t.Logf("before the raise: %s", counts(qi))
	require.Greater(t, qi.Scheduled, 30, "most jobs went back holding their turns")

	raise := time.Now()
	sluice("set", "sleep=100/s,burst=10,max-wait=500ms")
	waitDrained(t, insp, 40*time.Second)
	took := time.Since(raise)
	t.Logf("after the raise to 100/s the %d jobs sent back were done in %v (at their old turns: about 25 s)", qi.Scheduled, took.Round(time.Millisecond))
	stats := stopFleet(t, fleet, stopTimeout)
	assert.Equal(t, int64(60), stats.Processed, "every job done once")
	assert.Less(t, took, 5*time.Second, "the raise reached the jobs sent back")
}

// TestResetReplansJobsSentBack: `sluice reset` empties a bucket's bookings,
// so the turns the jobs sent back hold are gone with them. Their tickets
// must be void and the jobs must take new turns in the fresh bucket: else
// they run at their old turns while jobs enqueued after the reset take the
// fresh bucket's, and the upstream gets twice the limit.
func TestResetReplansJobsSentBack(t *testing.T) {
	const rate = 2.0
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	probe := startJitterProbe(t)
	up := newUpstream(t, upstreamConfig{})
	fleet := startFleet(t, srv, insp, 2, "--concurrency", "4", "--limit", "http:request=2/s,burst=1,max-wait=500ms,adapt=off")
	enqueueIDs(t, srv, up, jobIDs("before", 16), nil)
	time.Sleep(2 * time.Second)
	require.Greater(t, queueInfo(t, insp).Scheduled, 8, "most jobs went back holding their turns")

	code, out := runCommand(t, 10*time.Second, bin.sluice, "reset", "http:request", "--redis", srv.URL(), "--key-prefix", keyPrefix)
	require.Equal(t, 0, code, out)
	reset := time.Now()
	enqueueIDs(t, srv, up, jobIDs("after", 8), nil)
	waitDrained(t, insp, 40*time.Second)
	stats := stopFleet(t, fleet, stopTimeout)

	var since []time.Time
	for _, a := range arrivals(up.Requests(), http.StatusOK) {
		if a.After(reset.Add(200 * time.Millisecond)) {
			since = append(since, a)
		}
	}
	worst, _ := excess(since, rate, 1)
	allowance := float64(probe.Worst()+upstreamJitter)*rate/float64(time.Second) + 0.5
	t.Logf("after the reset: %d arrivals over %v; worst %.2f tokens over 2/s burst 1 (allowance %.2f); %s",
		len(since), span2(since), worst, allowance, strings.TrimSpace(out))
	assert.Equal(t, int64(24), stats.Processed, "every job once")
	assert.LessOrEqual(t, worst, allowance, "the old turns and the fresh bucket's are not both granted")
}

// span2 is the time from the first to the last of at.
func span2(at []time.Time) time.Duration {
	if len(at) < 2 {
		return 0
	}
	return at[len(at)-1].Sub(at[0]).Round(time.Millisecond)
}
