package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// Issue #26's case: three workers × 10 under 40/s; 800 jobs at priority 5,
// then 2 s later 80 at priority 1.
const (
	qpLow   = 800
	qpHigh  = 80
	qpRate  = 40.0
	qpBurst = 4
	qpLimit = "http:request=40/s,burst=4,priority=on,adapt=off"
	qpLater = 2 * time.Second
)

// writePayloads writes n http:request payloads of bucket b, ids b0..b(n-1),
// as an NDJSON file, and returns its path.
func writePayloads(t *testing.T, up *upstream, b string, n int) string {
	t.Helper()
	var lines strings.Builder
	for i := range n {
		fmt.Fprintln(&lines, up.Payload(t, b+strconv.Itoa(i), b))
	}
	path := filepath.Join(t.TempDir(), b+".ndjson")
	require.NoError(t, os.WriteFile(path, []byte(lines.String()), 0o600))
	return path
}

// TestPriorityAheadOfBacklog: the 80 priority-1 jobs are dequeued ahead of
// the priority-5 backlog (the queue side: each priority its member of the
// queue, weighted) and finish within 1.3× the time 80 jobs take at 40/s
// after their enqueue; the priority-5 jobs keep at
// least 5 % of the rate meanwhile; every job runs once, none archived, the
// whole run within 1.1× the ideal makespan. `sluice limits --json` counts
// the backlog by priority, and the workers' status lines the jobs waiting
// by priority.
//
// This is issue #26's bar through both halves: the queue's (each priority
// its member of the queue) and the bucket's (priority=on: the priority-5
// jobs in the slots do not hold turns ahead of the priority-1 ones). With
// the queue's half alone the 80 took 2.80–2.95 s; with the bucket's alone,
// and every job in one asynq queue, see TestPriorityFirst.
func TestPriorityAheadOfBacklog(t *testing.T) {
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{})
	fleet := startFleet(t, srv, insp, fleetSize, "--concurrency", concurrency, "--limit", qpLimit, "--status-interval", "1s")
	defer func() {
		_, found := findLog(fleet[0], func(e logEntry) bool {
			return e.Msg == "worker status" && strings.Contains(e.text(), `"waiting_by_priority":"p5=`)
		})
		assert.True(t, found, "a status line counts the jobs waiting by priority")
	}()
	enqueue(t, srv.URL(), "--type", "http:request", "--priority", "5", "--payloads", writePayloads(t, up, "low", qpLow))
	time.Sleep(qpLater)
	high := writePayloads(t, up, "high", qpHigh)
	hEnq := time.Now()
	enqueue(t, srv.URL(), "--type", "http:request", "--priority", "1", "--payloads", high)
	// Seen: sluice limits counts the backlog by priority, and the jobs
	// waiting in the workers by priority (their heartbeats, every 5 s),
	// while the priority-5 backlog lasts.
	var view struct {
		Queued  map[string]int   `json:"queued_by_priority"`
		Waiting map[string]int64 `json:"waiting_by_priority"`
	}
	seenLow := poll(8*time.Second, 200*time.Millisecond, func() bool {
		code, out := runCommand(t, 10*time.Second, bin.sluice, "limits", "--json", "--redis", srv.URL(), "--key-prefix", keyPrefix)
		require.Equal(t, 0, code, out)
		var views []json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(out), &views), out)
		require.Len(t, views, 1, out)
		require.NoError(t, json.Unmarshal(views[0], &view), out)
		return view.Queued["5"] > 0
	})
	// The jobs waiting in the workers by priority are there too when the
	// heartbeat found some (priority 5's jobs mostly wait at their places in
	// the queue, not in a worker): cmd/sluice's test holds that view.
	t.Logf("sluice limits during the run: queued by priority %v, waiting by priority %v", view.Queued, view.Waiting)
	assert.True(t, seenLow, "sluice limits shows priority 5 queued: %+v", view)
	qi := waitDrained(t, insp, 60*time.Second)
	stopFleet(t, fleet, stopTimeout)
	rs := up.Requests()

	var hLast time.Time
	seen := make(map[string]int)
	for _, q := range rs {
		seen[q.ID]++
		if q.Bucket == "high" {
			hLast = q.At
		}
	}
	low := 0 // priority-5 requests while the priority-1 jobs had work
	for _, q := range rs {
		if q.Bucket == "low" && q.At.After(hEnq) && !q.At.After(hLast) {
			low++
		}
	}
	twice := 0
	for _, n := range seen {
		if n > 1 {
			twice++
		}
	}
	bound := time.Duration(1.3 * qpHigh / qpRate * float64(time.Second))
	ideal := idealMakespan(qpLow+qpHigh, qpRate, qpBurst)
	t.Logf("priority 1's last job %.2fs after its enqueue (bound %.2fs); priority 5 had %d of %d requests meanwhile (%.1f %%); makespan %.2fs (ideal %.2fs)",
		hLast.Sub(hEnq).Seconds(), bound.Seconds(), low, low+qpHigh, 100*float64(low)/float64(low+qpHigh),
		span(rs).Seconds(), ideal.Seconds())
	assert.Less(t, hLast.Sub(hEnq), bound, "the 80 within 1.3x their time at 40/s")
	assert.GreaterOrEqual(t, float64(low)/float64(low+qpHigh), 0.05, "priority 5 keeps at least 5 %% of the rate")
	assert.Len(t, seen, qpLow+qpHigh, "every job ran")
	assert.Zero(t, twice, "jobs ran twice")
	assert.Equal(t, len(rs), byStatus(rs)[http.StatusOK])
	assert.Less(t, span(rs).Seconds(), 1.1*ideal.Seconds(), "makespan within 1.1x the ideal")
	assert.Zero(t, qi.Archived, "archived")
}
