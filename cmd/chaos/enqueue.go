package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/httpjob"
	"github.com/sluicehq/sluice/queue"
)

// enqueuer puts the workload's jobs on the queue through queue.Client, each
// with its own asynq task id (the job's id), so that an enqueue that timed
// out can be tried again without making a second job: an id conflict means
// the first try got through. Every third job has MaxRetry 0, which asynq
// would archive at its first failure: a throttled job must never be one.
type enqueuer struct {
	qc *queue.Client
	up *upstream

	mu       sync.Mutex
	enqueued map[string]string // job id → tenant, once Redis has it
	retried  map[string]bool   // jobs whose enqueue was tried again after an error
	given    []string          // jobs given up at the end of the run, never acknowledged
}

func newEnqueuer(rdb redis.UniversalClient, up *upstream) *enqueuer {
	return &enqueuer{
		qc:       queue.NewClient(asynq.NewClientFromRedisClient(rdb)),
		up:       up,
		enqueued: make(map[string]string),
		retried:  make(map[string]bool),
	}
}

// run enqueues the workload drawn from seed, tick by tick, until ctx ends.
// A tick's jobs go out in order; while Redis is down the enqueuer falls
// behind and catches up after.
func (e *enqueuer) run(ctx context.Context, seed uint64, rate float64) {
	w := newWorkload(seed, rate)
	seq := make([]int, len(tenants))
	tick := time.NewTicker(workloadTick)
	defer tick.Stop()
	for n := 0; ; n++ {
		for i, count := range w.next() {
			for range count {
				seq[i]++
				id := fmt.Sprintf("%s-%06d", tenants[i].name, seq[i])
				if !e.enqueue(ctx, id, tenants[i].name, (seq[i])%3 == 0) {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// enqueue sends one job, trying again after an error until Redis has it or
// ctx ends (then the job is counted as given up, not enqueued).
func (e *enqueuer) enqueue(ctx context.Context, id, tenant string, noRetry bool) bool {
	payload, err := json.Marshal(httpjob.Request{URL: e.up.URL(id, tenant), Method: http.MethodGet})
	if err != nil {
		panic(err) // a struct of strings always marshals
	}
	opts := []asynq.Option{asynq.TaskID(id)}
	if noRetry {
		opts = append(opts, asynq.MaxRetry(0))
	}
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, redisOpTimeout)
		_, err := e.qc.Enqueue(cctx, queue.Task{Type: jobType, Payload: payload, Key: tenant}, opts...)
		cancel()
		if err == nil || errors.Is(err, asynq.ErrTaskIDConflict) {
			e.mu.Lock()
			e.enqueued[id] = tenant
			if attempt > 0 {
				e.retried[id] = true
			}
			e.mu.Unlock()
			return true
		}
		select {
		case <-ctx.Done():
			e.mu.Lock()
			e.given = append(e.given, id)
			e.mu.Unlock()
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Enqueued returns a copy of the jobs Redis acknowledged, id → tenant.
func (e *enqueuer) Enqueued() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := make(map[string]string, len(e.enqueued))
	for k, v := range e.enqueued {
		m[k] = v
	}
	return m
}

// Retried reports whether the enqueue of job id was tried again after an
// error: if the first try did reach Redis and the job had already run when
// the second came, asynq took the second as a new task, and the job runs
// twice through no fault of the fleet's.
func (e *enqueuer) Retried(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.retried[id]
}

// Count is how many jobs Redis has acknowledged so far.
func (e *enqueuer) Count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.enqueued)
}
