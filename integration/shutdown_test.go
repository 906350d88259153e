package integration

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
)

// TestShutdownReturnsWaitingJobs sends SIGTERM to a worker whose twenty
// slots all hold jobs waiting in Acquire for a slow limit, and checks that
// it stops within its shutdown timeout, that the tokens the waiting jobs had
// reserved went back to the bucket, that the jobs went back to the queue
// without spending a retry or being archived, and that a new worker then
// runs them all.
func TestShutdownReturnsWaitingJobs(t *testing.T) {
	const (
		jobs            = 100
		slots           = 20
		shutdownTimeout = 10 * time.Second
		// stopSlack is what the worker may take beyond its shutdown timeout:
		// asynq's own shutdown steps and the process's exit.
		stopSlack = 5 * time.Second
	)
	// 2 jobs a second, burst 2 (the spec's default for 2/s): twenty waiting
	// jobs hold reservations up to ten seconds ahead.
	limit := throttle.Limit{Rate: 2, Period: time.Second, Burst: 2}
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{})
	w := startWorker(t, "worker", srv.URL(), "--concurrency", strconv.Itoa(slots),
		"--limit", "http:request=2/s", "--max-wait", "30s", "--log-level", "debug", "--shutdown-timeout", shutdownTimeout.String())
	waitServers(t, insp, startTimeout, w)

	enqueue(t, srv.URL(), "--type", "http:request", "--count", strconv.Itoa(jobs), "--payload", up.Payload(t, "", ""))
	// Every slot busy, and a few jobs through: the rest wait for their turn.
	require.True(t, poll(20*time.Second, 50*time.Millisecond, func() bool {
		return queueInfo(t, insp).Active == slots && up.Count(http.StatusOK) >= 3
	}), "the worker did not fill its %d slots", slots)

	stats, took := stopWorker(t, w, shutdownTimeout+stopSlack)
	t.Logf("stopped %v after SIGTERM (shutdown timeout %v); processed=%d requeued=%d", took.Round(time.Millisecond), shutdownTimeout, stats.Processed, stats.Requeued)
	assert.LessOrEqual(t, took, shutdownTimeout+stopSlack, "time to stop after SIGTERM")

	// The bucket: had the waiting jobs kept their reservations, it would be
	// about slots/Rate = 10 s in debt. With them given back, the job that
	// ran last took the last token spent, and the next is at most one token
	// interval (1/Rate) away.
	lim := throttle.NewLimiter(throttle.NewRedisStore(srv.Client(t)), throttle.WithKeyPrefix(keyPrefix))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := lim.TryAcquire(ctx, "http:request", limit, 1)
	require.NoError(t, err)
	debt := time.Duration(float64(slots) / limit.Rate * float64(time.Second))
	t.Logf("after the shutdown: TryAcquire allowed=%v retry_after=%v remaining=%d (%d unreturned reservations would be %v of debt)",
		res.Allowed, res.RetryAfter, res.Remaining, slots, debt)
	assert.LessOrEqual(t, res.RetryAfter, time.Duration(float64(time.Second)/limit.Rate),
		"the next token at most one interval away after the shutdown: every waiting job's reservation went back")

	// The jobs: those that did not run are back on the queue, as new
	// copies that have spent no retry.
	qi := queueInfo(t, insp)
	done := up.Count(http.StatusOK)
	assert.Equal(t, int64(done), stats.Processed, "jobs processed: the worker's count and the upstream's")
	assert.Equal(t, jobs-done, qi.Pending+qi.Scheduled, "jobs back on the queue (%s)", counts(qi))
	assert.Equal(t, 0, qi.Active, "active tasks")
	assert.Equal(t, 0, qi.Retry, "retrying tasks")
	assert.Equal(t, 0, qi.Archived, "archived tasks")
	var tickets int
	var furthest time.Duration
	for _, ti := range append(listAll(t, insp.ListPendingTasks), listAll(t, insp.ListScheduledTasks)...) {
		assert.Equal(t, 0, ti.Retried, "task %s: retries spent", ti.ID)
		if m, err := queue.MetaOf(asynq.NewTaskWithHeaders(ti.Type, nil, ti.Headers)); err == nil && !m.Slot.IsZero() {
			tickets++
			furthest = max(furthest, time.Until(m.Slot))
		}
	}
	// A job sent back holding a ticket keeps tokens reserved for it: if the
	// bucket is in debt, this says whose.
	t.Logf("back on the queue: %d jobs, %d of them holding a ticket (a reservation), the furthest %v ahead",
		qi.Pending+qi.Scheduled, tickets, furthest.Round(time.Millisecond))

	// A new worker runs them, at a faster limit on the same bucket, which
	// takes effect on its next call, to keep the test short.
	w2 := startWorker(t, "worker2", srv.URL(), "--concurrency", strconv.Itoa(slots), "--limit", "http:request=100/s,burst=10")
	waitServers(t, insp, startTimeout, w2)
	qi = waitDrained(t, insp, drainTimeout)
	stats2, _ := stopWorker(t, w2, stopTimeout)
	assert.Equal(t, jobs, up.Count(http.StatusOK), "requests answered 200: every job ran once")
	assert.Equal(t, int64(jobs-done), stats2.Processed, "jobs the new worker processed")
	assert.Equal(t, 0, qi.Archived, "archived tasks")
}
