package integration

import (
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

// Issue #26's queue side for tenants: tenant A has a deep backlog, tenant B
// enqueues lanesSmall jobs behind it. B's jobs go to a lane of their own of
// the queue (queue.WithLanes), so the fleet dequeues them at once instead
// of sending A's backlog back first.
const (
	lanesSmall = 1000
	lanesRate  = 200.0 // the global bucket, shared fairly: B's half is 100/s
	lanesLimit = "http:request=1000/s,burst=100,key=tenant:{header.sluice-key},global=200/s:10,adapt=off"
)

// lanesBig is tenant A's backlog: 100,000 jobs, or 300,000 with
// SLUICE_LANES=long (go test -run TestTenantFirstJobBehindBacklog
// ./integration with SLUICE_LANES=long).
func lanesBig() int {
	if os.Getenv("SLUICE_LANES") == "long" {
		return 300_000
	}
	return 100_000
}

// TestTenantFirstJobBehindBacklog: three workers × 10, a fair global bucket
// of 200/s; tenant A enqueues lanesBig jobs, and a second later tenant B
// enqueues 1,000. B's first job runs within 1 s of B's enqueue, B gets half
// the global rate while both have work (within 10 %), every one of B's jobs
// runs once, and nothing is archived. The fleet is stopped once B is done:
// A's backlog is not drained.
func TestTenantFirstJobBehindBacklog(t *testing.T) {
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{})
	fleet := startFleet(t, srv, insp, fleetSize, "--concurrency", concurrency, "--limit", lanesLimit, "--status-interval", "1s")

	big := lanesBig()
	began := time.Now()
	enqueue(t, srv.URL(), "--type", "http:request", "--key", "A", "--count", strconv.Itoa(big), "--payload", up.Payload(t, "", "A"))
	t.Logf("enqueued %d jobs of A in %.2fs", big, time.Since(began).Seconds())
	time.Sleep(time.Second)

	var lines strings.Builder
	for i := range lanesSmall {
		fmt.Fprintln(&lines, up.Payload(t, "b"+strconv.Itoa(i), "B"))
	}
	path := filepath.Join(t.TempDir(), "b.ndjson")
	require.NoError(t, os.WriteFile(path, []byte(lines.String()), 0o600))
	bEnq := time.Now()
	enqueue(t, srv.URL(), "--type", "http:request", "--key", "B", "--payloads", path)

	var bFirst time.Time
	bDone := poll(60*time.Second, 50*time.Millisecond, func() bool {
		n := 0
		for _, q := range up.Requests() {
			if q.Bucket == "B" {
				if bFirst.IsZero() {
					bFirst = q.At
				}
				n++
			}
		}
		return n >= lanesSmall
	})
	qi := queueInfo(t, insp)
	stopFleet(t, fleet, stopTimeout)
	rs := up.Requests()
	require.True(t, bDone, "B's jobs did not all run within 60 s")

	a, b := shares(rs)
	ids := make(map[string]int)
	for _, q := range rs {
		if q.Bucket == "B" {
			ids[q.ID]++
		}
	}
	twice := 0
	for _, n := range ids {
		if n > 1 {
			twice++
		}
	}
	var bLast time.Time
	for _, q := range rs {
		if q.Bucket == "B" {
			bLast = q.At
		}
	}
	t.Logf("B's first job %.3fs after B's enqueue; while both had work A %d, B %d (B's share %.3f); B's %d jobs took %.2fs (%.1f/s); queue %s",
		bFirst.Sub(bEnq).Seconds(), a, b, float64(b)/float64(a+b), lanesSmall, bLast.Sub(bFirst).Seconds(),
		float64(lanesSmall)/bLast.Sub(bFirst).Seconds(), counts(qi))
	assert.Less(t, bFirst.Sub(bEnq), time.Second, "B's first job within 1 s of its enqueue")
	assert.InDelta(t, 0.5, float64(b)/float64(a+b), 0.05, "B's share of the global rate while both have work")
	assert.InDelta(t, lanesRate/2, float64(lanesSmall)/bLast.Sub(bFirst).Seconds(), lanesRate/2*0.1, "B's rate: half the global rate")
	assert.Len(t, ids, lanesSmall, "every job of B ran")
	assert.Zero(t, twice, "a job of B ran twice")
	assert.Equal(t, len(rs), byStatus(rs)[http.StatusOK], "every request answered 200")
	assert.Zero(t, qi.Archived, "archived")
}
