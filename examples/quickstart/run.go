package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
)

var errTimeout = errors.New("time is up")

// run enqueues o.Jobs jobs, works through them with o.Hosts pools sharing
// o.Limit, printing progress and then a summary to out. It returns nil once
// every job has run exactly once and nothing is left in the queue.
func run(ctx context.Context, out io.Writer, o options) error {
	if o.Jobs < 1 || o.Hosts < 1 || o.Concurrency < 1 || o.Timeout <= 0 {
		return fmt.Errorf("invalid options: %d jobs, %d hosts, concurrency %d, timeout %v", o.Jobs, o.Hosts, o.Concurrency, o.Timeout)
	}
	if err := throttle.Validate(o.Limit); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, o.Timeout, errTimeout)
	defer cancel()

	b, err := openBackend(ctx, o.RedisURL)
	if err != nil {
		return err
	}
	defer b.Close()

	// A queue and a bucket of this run's own, so that a shared Redis never
	// mixes two runs.
	id := runID()
	qname := "quickstart-" + id
	prefix := "sluice:quickstart:" + id + ":"

	fmt.Fprintf(out, "sluice quickstart: %d %q jobs, %d hosts × %d workers sharing one limit of %g/s (burst %d), on %v\n",
		o.Jobs, taskType, o.Hosts, o.Concurrency, perSecond(o.Limit), o.Limit.Burst, b)

	rdb := b.client()
	defer rdb.Close()
	ac := asynq.NewClientFromRedisClient(rdb)
	defer ac.Close()
	if err := enqueue(ctx, queue.NewClient(ac), qname, o.Jobs); err != nil {
		return err
	}

	t := newTally(o.Jobs)
	hosts := make([]*host, 0, o.Hosts)
	defer func() { stopAll(hosts) }() // on an early return; a no-op after the stopAll below
	start := time.Now()
	for i := range o.Hosts {
		h, err := startHost(hostName(i), b, o, qname, prefix, t)
		if err != nil {
			return err
		}
		hosts = append(hosts, h)
	}

	watchErr := watch(ctx, out, o, t, hosts, start)
	wait := make([]time.Duration, len(hosts))
	waited := make([]uint64, len(hosts))
	for i, h := range hosts {
		wait[i], waited[i] = h.waited(context.Background())
	}
	stats := poolStats(hosts)
	if err := stopAll(hosts); err != nil {
		return err
	}
	hosts = nil

	insp := asynq.NewInspectorFromRedisClient(rdb)
	defer insp.Close()
	info, err := insp.GetQueueInfo(qname)
	if err != nil {
		return fmt.Errorf("inspect queue %s: %w", qname, err)
	}
	s := summary{
		opts: o, backend: b, snap: t.snapshot(), elapsed: time.Since(start),
		stats: stats, info: info, wait: wait, waited: waited,
	}
	s.print(out)

	checkErr := s.check()
	if !b.embedded() && (checkErr == nil || watchErr != nil) {
		// Nobody will read this run's queue again: remove it, with what an
		// interrupted run left in it. A finished run that left jobs behind
		// keeps them, for a look with asynq's tools.
		if err := removeQueue(rdb, insp, qname, watchErr != nil); err != nil {
			fmt.Fprintf(out, "could not remove queue %s: %v\n", qname, err)
		}
	}
	switch {
	case errors.Is(watchErr, errTimeout):
		return fmt.Errorf("not all jobs finished within %v: %d of %d done", o.Timeout, s.snap.done, o.Jobs)
	case watchErr != nil:
		return fmt.Errorf("interrupted: %d of %d jobs done; the rest went back to the queue", s.snap.done, o.Jobs)
	}
	return checkErr
}

// enqueue sends n jobs to queue qname. They have MaxRetry 0: a failure would
// archive them at once, but being throttled is not a failure and spends no
// retry.
func enqueue(ctx context.Context, qc *queue.Client, qname string, n int) error {
	for i := range n {
		payload, err := json.Marshal(report{ID: i + 1, Format: "pdf"})
		if err != nil {
			return err
		}
		if _, err := qc.Enqueue(ctx, queue.Task{Type: taskType, Payload: payload}, asynq.Queue(qname), asynq.MaxRetry(0)); err != nil {
			return fmt.Errorf("enqueue job %d of %d: %w", i+1, n, err)
		}
	}
	return nil
}

// watch prints a progress line every o.Progress until every job has run, or
// ctx ends: then it returns ctx's cause.
func watch(ctx context.Context, out io.Writer, o options, t *tally, hosts []*host, start time.Time) error {
	var tick <-chan time.Time
	if o.Progress > 0 {
		tk := time.NewTicker(o.Progress)
		defer tk.Stop()
		tick = tk.C
		printHeader(out, hosts)
	}
	prev, prevAt := 0, start
	for {
		select {
		case <-t.all:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		case now := <-tick:
			snap := t.snapshot()
			printProgress(out, now.Sub(start), snap, o.Jobs, float64(snap.done-prev)/now.Sub(prevAt).Seconds(), poolStats(hosts), hosts)
			prev, prevAt = snap.done, now
		}
	}
}

// stopAll shuts every host down at once, and waits for them all.
func stopAll(hosts []*host) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.stop(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runID is a short random id for this run's queue and bucket.
func runID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// removeQueue removes queue qname from Redis, with the jobs left in it if
// force is set. asynq's DeleteQueue leaves the queue's counters behind (the
// total of processed and failed tasks has no TTL), so removeQueue deletes
// those too: every key of the queue is named "asynq:{<qname>}:...", and the
// name is this run's own.
func removeQueue(rdb *redis.Client, insp *asynq.Inspector, qname string, force bool) error {
	if err := insp.DeleteQueue(qname, force); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, "asynq:{"+qname+"}:*", 100).Iterator()
	for iter.Next(ctx) {
		if err := rdb.Del(ctx, iter.Val()).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}
