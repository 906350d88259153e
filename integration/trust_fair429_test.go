package integration

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestFairSharesUnder429sArchiveNothing is issue #24's first case: with every
// default on (fair shares, adaptive limits), two tenants with backlogs
// through a per-tenant bucket and a global one, in front of an upstream
// that allows less than the global limit and answers 429 with Retry-After
// beyond it. Jobs sent back after a 429 are refused by the share of their
// tenant, not by the horizon: none may be archived, and each job is done
// exactly once.
func TestFairSharesUnder429sArchiveNothing(t *testing.T) {
	const (
		acme   = 360
		globex = 120
		limit  = "http:request=100/s,burst=10,key=tenant:{header.sluice-key},global=60/s:6"
	)
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{Rate: 40, Burst: 4})
	fleet := startFleet(t, srv, insp, fleetSize, "--concurrency", concurrency, "--limit", limit)
	enqueueKeyed(t, srv, up, "acme", jobIDs("acme", acme), nil)
	enqueueKeyed(t, srv, up, "globex", jobIDs("globex", globex), nil)
	qi := waitDrained(t, insp, 90*time.Second)
	stats := stopFleet(t, fleet, stopTimeout)

	rs := up.Requests()
	done := okByID(rs)
	t.Logf("%d requests: %v; makespan %.1fs; requeued %d; archived %d", len(rs), byStatus(rs), span(rs).Seconds(), stats.Requeued, qi.Archived)
	assert.Equal(t, 0, qi.Archived, "archived: %v", lastErrs(archivedTasks(t, insp)))
	assert.Equal(t, acme+globex, len(done), "jobs done")
	for id, n := range done {
		assert.Equal(t, 1, n, "job %s done %d times", id, n)
	}
	assert.Positive(t, byStatus(rs)[http.StatusTooManyRequests], "the upstream refused some: the case under test")
}
