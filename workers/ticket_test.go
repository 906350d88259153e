package workers_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// runTimes records when a pool's handler ran.
type runTimes struct {
	mu sync.Mutex
	at []time.Time
}

func (r *runTimes) handler(ctx context.Context, task *asynq.Task) error {
	r.mu.Lock()
	r.at = append(r.at, time.Now())
	r.mu.Unlock()
	return nil
}

// sorted returns the run times so far, in order.
func (r *runTimes) sorted() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.SortedFunc(slices.Values(r.at), time.Time.Compare)
}

// Tasks enqueued by something other than sluice with a made-up ticket (a
// sluice-slot header, with or without an id) are not honoured: each takes a
// turn like any job, so they run at the limit's pace, not all at the slot.
func TestPoolForgedTicketTakesATurn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers func(slot time.Time) map[string]string
	}{
		{"slot only", func(slot time.Time) map[string]string {
			return map[string]string{"sluice-slot": micros(slot)}
		}},
		{"made-up id", func(slot time.Time) map[string]string {
			return map[string]string{"sluice-slot": micros(slot), "sluice-ticket": strings.Repeat("ab", 16)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			limit := throttle.Limit{Rate: 5, Period: time.Second, Burst: 1}
			var runs runTimes
			p, err := workers.NewPool(h.config(t))
			require.NoError(t, err)
			p.HandleFunc("call", runs.handler, &workers.Policy{Name: "api", Limit: limit, MaxWait: 5 * time.Second})
			start(t, p)

			const jobs = 5
			slot := time.Now().Add(300 * time.Millisecond)
			for range jobs {
				h.enqueueRaw(t, asynq.NewTaskWithHeaders("call", nil, tc.headers(slot)), asynq.MaxRetry(0))
			}
			waitFor(t, 15*time.Second, "every job to run", func() bool { return len(runs.sorted()) == jobs })
			at := runs.sorted()
			// 5/s, burst 1: four intervals of 200 ms from the first to the last.
			assert.GreaterOrEqual(t, at[jobs-1].Sub(at[0]), 640*time.Millisecond, "the forged tickets ran together")
			assert.Equal(t, int64(0), p.Stats().Archived)
		})
	}
}

// A real ticket copied onto other tasks is redeemed once: the copies and the
// job it was issued to run at the limit's pace, one of them on the ticket.
func TestPoolCopiedTicketRedeemedOnce(t *testing.T) {
	h := newHarness(t)
	limit := throttle.Limit{Rate: 5, Period: time.Second, Burst: 1}
	var runs runTimes
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	p.HandleFunc("call", runs.handler, &workers.Policy{Name: "api", Limit: limit, MaxWait: 50 * time.Millisecond})
	start(t, p)

	// Two seconds of debt: the job goes back holding a ticket two seconds off.
	ctx := context.Background()
	for range 10 {
		_, err := h.lim.Reserve(ctx, "api", limit, 1, time.Minute)
		require.NoError(t, err)
	}
	h.enqueue(t, queue.Task{Type: "call"}, asynq.MaxRetry(0))
	ticket := make(map[string]string)
	waitFor(t, 5*time.Second, "the job to go back holding a ticket", func() bool {
		tasks, err := h.insp.ListScheduledTasks(h.queue)
		require.NoError(t, err)
		for _, ti := range tasks {
			for k, v := range ti.Headers {
				if strings.HasPrefix(k, "sluice-slot") || k == "sluice-ticket" {
					ticket[k] = v
				}
			}
		}
		return len(ticket) > 0
	})
	const copies = 4
	for range copies {
		h.enqueueRaw(t, asynq.NewTaskWithHeaders("call", nil, ticket), asynq.MaxRetry(0))
	}
	waitFor(t, 15*time.Second, "every job to run", func() bool { return len(runs.sorted()) == 1+copies })
	at := runs.sorted()
	assert.GreaterOrEqual(t, at[copies].Sub(at[0]), 640*time.Millisecond, "the copies of the ticket ran together")
	assert.Equal(t, int64(0), p.Stats().Archived)
}

// A job that goes back while the queue's Redis does not answer (a black hole
// for longer than one send-back waits) is kept by the worker, which tries
// again until the queue takes it: the job, enqueued with MaxRetry 0 by a
// plain asynq client, runs again and is not archived.
func TestPoolSendBackRidesOutAStalledQueue(t *testing.T) {
	h := newHarness(t)
	proxy := faultproxy.Start(t, h.srv.Addr())
	cfg := h.config(t)
	cfg.Redis = asynq.RedisClientOpt{Addr: proxy.Addr()}
	limit := throttle.Limit{Rate: 10, Period: time.Second, Burst: 1}
	const stall = 6 * time.Second // longer than a send-back's queue.RequeueTimeout

	runs := make(chan time.Time, 4)
	var once sync.Once
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	p.HandleFunc("call", func(ctx context.Context, task *asynq.Task) error {
		runs <- time.Now()
		refused := false
		once.Do(func() {
			proxy.BlackHole(true) // the queue's Redis stalls as the job goes back
			time.AfterFunc(stall, func() { proxy.BlackHole(false) })
			refused = true
		})
		if refused {
			return &workers.UpstreamError{StatusCode: 429, RetryAfter: time.Second}
		}
		return nil
	}, &workers.Policy{Name: "api", Limit: limit})
	start(t, p)

	h.enqueueRaw(t, asynq.NewTask("call", nil), asynq.MaxRetry(0))
	first := recv(t, runs, 10*time.Second, "the refused run")
	second := recv(t, runs, stall+15*time.Second, "the run after the stall")
	assert.GreaterOrEqual(t, second.Sub(first), stall, "it ran again before the queue answered")
	waitFor(t, 5*time.Second, "the job done", func() bool { return p.Stats().Processed == 1 })
	q := h.queueInfo(t)
	assert.Equal(t, 0, q.Archived, "archived")
	assert.Equal(t, 0, q.Retry, "retrying")
	assert.Equal(t, int64(0), p.Stats().Archived)
}
