package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestPriorityWithEveryOption: priorities and lanes with the other options
// on, through the built binaries: a key per tenant and a fair global bucket
// (key=, global=), an adaptive limit (the default), a 429 window at the
// upstream (a cooldown for the fleet), and a runtime change by `sluice set`
// in the middle. Tenant A has 600 jobs at priority 5, tenant B 60 at
// priority 1 enqueued a second later. B's jobs are all done before A's
// backlog, every job runs once (those refused included), none is archived.
func TestPriorityWithEveryOption(t *testing.T) {
	const (
		limit  = "http:request=1000/s,burst=100,key=tenant:{header.sluice-key},global=60/s:5"
		raised = "http:request=1000/s,burst=100,key=tenant:{header.sluice-key},global=80/s:5"
		aJobs  = 600
		bJobs  = 60
	)
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{})
	fleet := startFleet(t, srv, insp, fleetSize, "--concurrency", concurrency, "--limit", limit)
	sluice := func(args ...string) {
		t.Helper()
		code, out := runCommand(t, 10*time.Second, bin.sluice, append(args, "--redis", srv.URL(), "--key-prefix", keyPrefix)...)
		require.Equal(t, 0, code, "sluice %s:\n%s", strings.Join(args, " "), out)
	}
	enqueue(t, srv.URL(), "--type", "http:request", "--key", "A", "--priority", "5", "--payloads", writePayloads(t, up, "A", aJobs))
	time.Sleep(time.Second)
	up.RefuseWindow(10, 500*time.Millisecond, "1")
	enqueue(t, srv.URL(), "--type", "http:request", "--key", "B", "--priority", "1", "--payloads", writePayloads(t, up, "B", bJobs))
	time.Sleep(time.Second)
	sluice("set", raised)
	qi := waitDrained(t, insp, 60*time.Second)
	stats := stopFleet(t, fleet, stopTimeout)
	rs := up.Requests()

	ok := map[string]int{}
	var aLast, bLast time.Time
	for _, q := range rs {
		if q.Status != http.StatusOK {
			continue
		}
		ok[q.ID]++
		switch q.Bucket {
		case "A":
			aLast = q.At
		case "B":
			bLast = q.At
		}
	}
	twice := 0
	for _, n := range ok {
		if n > 1 {
			twice++
		}
	}
	refused := len(rs) - byStatus(rs)[http.StatusOK]
	t.Logf("%d requests refused (429); B's last job %.2fs before A's; requeued %d, cooldowns %d", refused,
		aLast.Sub(bLast).Seconds(), stats.Requeued, stats.Cooldowns)
	assert.Positive(t, refused, "the upstream refused some")
	assert.Positive(t, stats.Cooldowns, "a cooldown")
	assert.Len(t, ok, aJobs+bJobs, "every job done")
	assert.Zero(t, twice, "jobs done twice")
	assert.True(t, bLast.Before(aLast.Add(-5*time.Second)), "B's priority-1 jobs done well before A's backlog")
	assert.Zero(t, qi.Archived, "archived")
}
