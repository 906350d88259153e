package integration

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// The tenants of issue #12's case: A enqueues fairBig jobs, B enqueues
// fairSmall a second later, every job through one global bucket of
// fairRate/s (burst fairBurst) and a per-tenant bucket far above it.
const (
	fairBig    = 1000
	fairSmall  = 40
	fairRate   = 50.0
	fairBurst  = 5
	fairLimit  = "http:request=1000/s,burst=100,key=tenant:{header.sluice-key},global=50/s:5,adapt=off"
	fairLaterB = time.Second
)

// fairRun is what one run of two tenants through a shared global bucket measured.
type fairRun struct {
	rs       []request
	bEnq     time.Time     // when B's jobs were enqueued
	bLast    time.Duration // from B's enqueue to B's last request
	makespan time.Duration // from the first request to the last
	qi       asynq.QueueInfo
	stats    finalStats
	fleet    []*process
}

// runFair runs three built workers under limit, enqueues fairBig jobs of
// tenant A, then fairSmall of tenant B fairLaterB later, and measures until
// the queue is drained. The upstream enforces nothing: it records.
func runFair(t *testing.T, limit string, during func(srv *redistest.Server)) fairRun {
	t.Helper()
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{})
	fleet := startFleet(t, srv, insp, fleetSize, "--concurrency", concurrency, "--limit", limit, "--status-interval", "1s")
	enqueue(t, srv.URL(), "--type", "http:request", "--key", "A", "--count", strconv.Itoa(fairBig), "--payload", up.Payload(t, "", "A"))
	time.Sleep(fairLaterB)
	r := fairRun{bEnq: time.Now()}
	enqueue(t, srv.URL(), "--type", "http:request", "--key", "B", "--count", strconv.Itoa(fairSmall), "--payload", up.Payload(t, "", "B"))
	if during != nil {
		during(srv)
	}
	r.qi = waitDrained(t, insp, 120*time.Second)
	r.stats = stopFleet(t, fleet, stopTimeout)
	r.rs = up.Requests()
	r.makespan = span(r.rs)
	for _, q := range r.rs {
		if q.Bucket == "B" {
			r.bLast = max(r.bLast, q.At.Sub(r.bEnq))
		}
	}
	t.Logf("makespan %.2fs (ideal %.2fs); B's last request %.2fs after B enqueued (fair %.2fs); requeues %d",
		r.makespan.Seconds(), idealMakespan(fairBig+fairSmall, fairRate, fairBurst).Seconds(),
		r.bLast.Seconds(), fairTime(fairSmall, 1, 2).Seconds(), r.stats.Requeued)
	r.fleet = fleet
	return r
}

// fairTime is how long n jobs of a tenant of weight w take at its share of
// fairRate among tenants of total weight total.
func fairTime(n int, w, total float64) time.Duration {
	return time.Duration(float64(n) / (fairRate * w / total) * float64(time.Second))
}

// shares counts each tenant's requests in the span where both had work:
// from B's first request to the first tenant's last.
func shares(rs []request) (a, b int) {
	var bFirst, aLast, bLast time.Time
	for _, q := range rs {
		switch q.Bucket {
		case "A":
			aLast = q.At
		case "B":
			if bFirst.IsZero() {
				bFirst = q.At
			}
			bLast = q.At
		}
	}
	end := aLast
	if bLast.Before(end) {
		end = bLast
	}
	for _, q := range rs {
		if q.At.Before(bFirst) || q.At.After(end) {
			continue
		}
		if q.Bucket == "A" {
			a++
		} else {
			b++
		}
	}
	return a, b
}

// TestFairShares is issue #12's case: 3 workers, global 50/s, tenant A
// enqueues 1,000 jobs and tenant B 40 a second later. B's 40 run within 2×
// their fair time (25/s while both have work: 1.6 s), the lot within 1.1×
// the ideal makespan, nothing archived.
func TestFairShares(t *testing.T) {
	var seen []string // the keys sluice limits showed sharing the global bucket while both had work
	r := runFair(t, fairLimit, func(srv *redistest.Server) {
		time.Sleep(500 * time.Millisecond)
		code, out := runCommand(t, 10*time.Second, bin.sluice, "limits", "--json", "--redis", srv.URL(), "--key-prefix", keyPrefix)
		require.Equal(t, 0, code, out)
		var views []struct {
			Type    string `json:"type"`
			Tenants []struct {
				Key   string  `json:"key"`
				Share float64 `json:"share"`
			} `json:"tenants"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &views), out)
		for _, v := range views {
			for _, tn := range v.Tenants {
				seen = append(seen, tn.Key)
				assert.InDelta(t, 0.5, tn.Share, 0.01, "%s's share while both have work", tn.Key)
			}
		}
		t.Logf("sluice limits --json during the run: %s", out)
	})
	ideal := idealMakespan(fairBig+fairSmall, fairRate, fairBurst)
	assert.Equal(t, fairBig+fairSmall, byStatus(r.rs)[http.StatusOK], "every job done once")
	assert.Less(t, r.bLast, 2*fairTime(fairSmall, 1, 2), "B's last job within 2x its fair time")
	assert.Less(t, r.makespan.Seconds(), 1.1*ideal.Seconds(), "makespan within 1.1x the ideal")
	assert.Equal(t, 0, r.qi.Archived, "archived")
	assert.ElementsMatch(t, []string{"tenant:A", "tenant:B"}, seen, "sluice limits lists both keys")
	_, found := findLog(r.fleet[0], func(e logEntry) bool {
		return e.Msg == "worker status" && strings.Contains(e.text(), "2 keys sharing: ")
	})
	assert.True(t, found, "a status line names the keys sharing the global bucket")
}

// TestFairWeights: with weights 3:1 (tenant A paid for three shares), the
// shares measured at the upstream while both tenants have work are within
// 10 % of 3:1. A has 450 jobs and B 200, enqueued together: at 37.5/s and
// 12.5/s A ends after 12 s, while B still has work.
func TestFairWeights(t *testing.T) {
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{})
	fleet := startFleet(t, srv, insp, fleetSize, "--concurrency", concurrency, "--limit", fairLimit+",weights=tenant:A:3")
	enqueue(t, srv.URL(), "--type", "http:request", "--key", "A", "--count", "450", "--payload", up.Payload(t, "", "A"))
	enqueue(t, srv.URL(), "--type", "http:request", "--key", "B", "--count", "200", "--payload", up.Payload(t, "", "B"))
	qi := waitDrained(t, insp, 120*time.Second)
	stopFleet(t, fleet, stopTimeout)
	rs := up.Requests()
	a, b := shares(rs)
	ratio := float64(a) / float64(b)
	t.Logf("while both had work: A %d, B %d requests: %.2f:1; makespan %.2fs", a, b, ratio, span(rs).Seconds())
	assert.Equal(t, 650, byStatus(rs)[http.StatusOK], "every job done once")
	assert.InDelta(t, 3.0, ratio, 0.3, "shares within 10%% of 3:1")
	assert.Equal(t, 0, qi.Archived, "archived")
}
