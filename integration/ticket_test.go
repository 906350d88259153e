package integration

import (
	"context"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
)

// TestTicketsCannotBeForgedOrCopied enqueues, with a plain asynq client,
// tasks that claim a turn they were never given: ten with a made-up
// sluice-slot header, and ten with every header of a real job that the
// worker sent back holding a ticket. Only sluice issues tickets, and each is
// redeemed once: the forged ones and all but one of the copies take a turn
// like any job, so the upstream sees the jobs no faster than the limit.
func TestTicketsCannotBeForgedOrCopied(t *testing.T) {
	const (
		rate   = 4 // jobs a second, burst 1
		copies = 10
		forged = 10
		debt   = 12 // turns the test takes first: 3 s
	)
	limit := throttle.Limit{Rate: rate, Period: time.Second, Burst: 1}
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{})
	w := startWorker(t, "worker", srv.URL(), "--concurrency", "30",
		"--limit", "http:request="+strconv.Itoa(rate)+"/s,burst=1", "--max-wait", "200ms")
	waitServers(t, insp, startTimeout, w)

	// The bucket in debt, so that the real job goes back holding a ticket
	// some seconds ahead, and the test has time to copy it.
	ctx, cancel := context.WithTimeout(context.Background(), enqueueTimeout)
	defer cancel()
	lim := throttle.NewLimiter(throttle.NewRedisStore(srv.Client(t)), throttle.WithKeyPrefix(keyPrefix))
	for i := range debt {
		_, err := lim.Reserve(ctx, "http:request", limit, 1, time.Minute)
		require.NoError(t, err, "reservation %d", i)
	}
	enqueueIDs(t, srv, up, []string{"real"}, nil)
	ticket := make(map[string]string) // the real job's ticket headers
	require.True(t, poll(10*time.Second, 20*time.Millisecond, func() bool {
		for _, ti := range listAll(t, insp.ListScheduledTasks) {
			if ti.Headers[queue.HeaderSlot] == "" {
				continue
			}
			for k, v := range ti.Headers {
				if strings.HasPrefix(k, "sluice-slot") || k == "sluice-ticket" {
					ticket[k] = v
				}
			}
			return true
		}
		return false
	}), "the real job was not sent back holding a ticket")
	t.Logf("the real job's ticket: %v", ticket)

	ac := asynq.NewClientFromRedisClient(srv.Client(t))
	for i := range copies {
		id := "copy-" + strconv.Itoa(i)
		_, err := ac.EnqueueContext(ctx, asynq.NewTaskWithHeaders("http:request", []byte(up.Payload(t, id, "")), maps.Clone(ticket)))
		require.NoError(t, err)
	}
	slot := strconv.FormatInt(time.Now().Add(1500*time.Millisecond).UnixMicro(), 10)
	for i := range forged {
		id := "forged-" + strconv.Itoa(i)
		h := map[string]string{queue.HeaderSlot: slot}
		_, err := ac.EnqueueContext(ctx, asynq.NewTaskWithHeaders("http:request", []byte(up.Payload(t, id, "")), h))
		require.NoError(t, err)
	}

	const jobs = 1 + copies + forged
	require.True(t, poll(60*time.Second, 50*time.Millisecond, func() bool { return up.Count(http.StatusOK) >= jobs }),
		"%d of %d jobs ran", up.Count(http.StatusOK), jobs)
	rs := up.Requests()
	at := make([]time.Time, len(rs))
	for i, r := range rs {
		at[i] = r.At
	}
	worst, where := excess(at, rate, 1)
	t.Logf("%d requests over %v; worst excess over %d/s burst 1: %.2f tokens at request %d (%s)",
		len(rs), span(rs).Round(time.Millisecond), rate, worst, where, rs[where].ID)
	// One token of slack for the jitter between a grant and its request.
	assert.LessOrEqual(t, worst, 1.0, "requests beyond the limit: forged or copied tickets were honoured")
	for id, n := range okByID(rs) {
		assert.Equal(t, 1, n, "runs of job %s", id)
	}
	qi := queueInfo(t, insp)
	assert.Equal(t, 0, qi.Archived, "archived tasks")
}
