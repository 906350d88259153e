package integration

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
)

// Issue #26's bar for the bucket: three workers × 10 slots share 40/s;
// prioLow jobs of priority 5 are enqueued, then 2 s later prioHigh of
// priority 1.
const (
	prioLow   = 800
	prioHigh  = 80
	prioRate  = 40.0
	prioBurst = 4
	prioLater = 2 * time.Second
	prioLimit = "http:request=40/s,burst=4,priority=on,adapt=off"
)

// enqueuePriority enqueues one http:request job per id at priority p, each
// a GET of the upstream's URL for that id recorded in bucket "p<p>", with
// the headers the sluice client writes (as `enqueue --priority` does).
func enqueuePriority(tb testing.TB, srv *redistest.Server, up *upstream, ids []string, p int) {
	tb.Helper()
	c := asynq.NewClientFromRedisClient(srv.Client(tb))
	ctx, cancel := context.WithTimeout(context.Background(), enqueueTimeout)
	defer cancel()
	b := "p" + strconv.Itoa(p)
	for _, id := range ids {
		h := map[string]string{
			queue.HeaderEnqueuedAt: strconv.FormatInt(time.Now().UnixMicro(), 10),
			queue.HeaderMaxRetry:   "0",
			queue.HeaderPriority:   strconv.Itoa(p),
		}
		task := asynq.NewTaskWithHeaders("http:request", []byte(up.Payload(tb, id, b)), h)
		if _, err := c.EnqueueContext(ctx, task, asynq.MaxRetry(0)); err != nil {
			tb.Fatalf("enqueue job %s: %v", id, err)
		}
	}
}

// TestPriorityFirst is issue #26's bar for priorities on a plain limit:
// the 80 jobs of priority 1 finish within 1.3× the time 80 jobs take at
// 40/s (2 s) after they are enqueued, the priority-5 jobs keep at least 5 %
// of the rate meanwhile, every job runs once, none is archived, and the
// whole run takes within 1.1× the ideal makespan.
//
// The priority-1 jobs are queued behind the priority-5 backlog in one asynq
// queue here: the pool reaches them by sending the backlog's jobs over
// their level's share back to their places. (The queue side of #26, a
// queue per priority, dequeues them first instead.)
func TestPriorityFirst(t *testing.T) {
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{})
	fleet := startFleet(t, srv, insp, fleetSize, "--concurrency", concurrency, "--limit", prioLimit, "--status-interval", "1s")
	enqueuePriority(t, srv, up, jobIDs("low", prioLow), 5)
	time.Sleep(prioLater)
	highEnq := time.Now()
	enqueuePriority(t, srv, up, jobIDs("high", prioHigh), 1)
	qi := waitDrained(t, insp, 120*time.Second)
	stats := stopFleet(t, fleet, stopTimeout)
	rs := up.Requests()

	var highLast time.Duration
	seen := map[string]int{}
	for _, q := range rs {
		seen[q.ID]++
		if q.Bucket == "p1" {
			highLast = max(highLast, q.At.Sub(highEnq))
		}
	}
	// The rate priority 5 kept while priority 1 had work: from priority 1's
	// enqueue to its last request.
	low, all := 0, 0
	for _, q := range rs {
		if d := q.At.Sub(highEnq); d >= 0 && d <= highLast {
			all++
			if q.Bucket == "p5" {
				low++
			}
		}
	}
	ideal := idealMakespan(prioLow+prioHigh, prioRate, prioBurst)
	bound := time.Duration(1.3 * float64(time.Duration(prioHigh/prioRate*float64(time.Second))))
	makespan := span(rs)
	t.Logf("priority 1's last request %.2fs after its enqueue (bound %.2fs); priority 5 had %d of %d requests meanwhile (%.1f%%); makespan %.2fs (ideal %.2fs); requeues %d",
		highLast.Seconds(), bound.Seconds(), low, all, 100*float64(low)/float64(max(all, 1)), makespan.Seconds(), ideal.Seconds(), stats.Requeued)

	assert.Equal(t, prioLow+prioHigh, byStatus(rs)[http.StatusOK], "every job done")
	assert.Len(t, seen, prioLow+prioHigh, "every job ran")
	for id, n := range seen {
		assert.Equal(t, 1, n, "job %s ran %d times", id, n)
	}
	assert.Equal(t, 0, qi.Archived, "archived")
	assert.LessOrEqual(t, highLast, bound, "priority 1's 80 jobs within 1.3× their time at 40/s")
	assert.GreaterOrEqual(t, float64(low), 0.05*float64(all), "priority 5 kept its floor, 5 %")
	assert.Less(t, makespan.Seconds(), 1.1*ideal.Seconds(), "makespan within 1.1× the ideal")
}
