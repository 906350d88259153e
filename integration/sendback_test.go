package integration

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestStalledQueueKeepsThrottledJobs stalls the worker's connection to the
// queues' Redis (a black hole: it answers nothing, for longer than a send-back
// waits for an answer) at the moment three jobs, enqueued by a plain asynq
// client with MaxRetry 0, are refused by the upstream (429, Retry-After) and
// go back to their queue. The worker keeps each job and tries again until the
// queue answers: when the stall is over, every job runs, none archived.
func TestStalledQueueKeepsThrottledJobs(t *testing.T) {
	const (
		jobs  = 3
		stall = 8 * time.Second // longer than one send-back's 5 s
	)
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	proxy := faultproxy.Start(t, srv.Addr())
	// The upstream answers after a second, and refuses the first requests:
	// the jobs go back while the queue's Redis is stalled.
	up := newUpstream(t, upstreamConfig{Delay: time.Second})
	up.RefuseWindow(0, 500*time.Millisecond, "1")
	w := startWorker(t, "worker", "redis://"+proxy.Addr()+"/0", "--limiter-redis", srv.URL(),
		"--concurrency", "5", "--limit", "http:request=100/s,burst=10", "--log-level", "debug")
	waitServers(t, insp, startTimeout, w)

	ac := asynq.NewClientFromRedisClient(srv.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), enqueueTimeout)
	defer cancel()
	ids := jobIDs("job", jobs)
	for _, id := range ids {
		_, err := ac.EnqueueContext(ctx, asynq.NewTask("http:request", []byte(up.Payload(t, id, ""))), asynq.MaxRetry(0))
		require.NoError(t, err)
	}
	require.True(t, poll(20*time.Second, 5*time.Millisecond, func() bool { return len(up.Requests()) >= jobs }),
		"the jobs did not reach the upstream")
	proxy.BlackHole(true)
	stalled := time.Now()
	time.Sleep(stall)
	proxy.BlackHole(false)
	t.Logf("queue Redis stalled for %v; the upstream refused %d requests", time.Since(stalled).Round(time.Millisecond), up.Count(http.StatusTooManyRequests))

	ok := poll(45*time.Second, 50*time.Millisecond, func() bool {
		qi := queueInfo(t, insp)
		return up.Count(http.StatusOK) >= jobs || qi.Archived > 0
	})
	qi := queueInfo(t, insp)
	for _, ti := range listAll(t, insp.ListArchivedTasks) {
		t.Logf("archived %s: %s", ti.ID, ti.LastErr)
	}
	assert.Equal(t, 0, qi.Archived, "archived tasks (%s)", counts(qi))
	require.True(t, ok, "jobs run: %d of %d (%s)", up.Count(http.StatusOK), jobs, counts(qi))
	for _, id := range ids {
		assert.Equal(t, 1, okByID(up.Requests())[id], "runs of job %s", id)
	}
	stats, _ := stopWorker(t, w, stopTimeout)
	assert.Equal(t, int64(0), stats.Archived, "jobs the worker archived")
}
