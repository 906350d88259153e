package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/queue"
)

const (
	// pingTimeout bounds the first contact with Redis.
	pingTimeout = 3 * time.Second
	// callTimeout bounds one enqueue call.
	callTimeout = 10 * time.Second
	// senders is how many goroutines enqueue at once: each call is one round
	// trip, so a few in flight multiply throughput.
	senders = 8
)

// progressEvery is how often progress is printed for a long run.
var progressEvery = time.Second

// run is the whole command, minus signal handling: ctx ends when the user
// interrupts. It returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stdin)
	if code, done := cli.Parsed(err, prog, usage, stdout, stderr); done {
		return code
	}
	r, err := cli.ParseRedis(c.redisURL)
	if err != nil {
		return cli.Report(stderr, prog, err)
	}

	pingCtx, cancel := context.WithTimeout(ctx, pingTimeout)
	err = r.Ping(pingCtx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "%s: interrupted before enqueuing anything\n", prog)
			return cli.ExitInterrupted
		}
		return cli.Report(stderr, prog, err)
	}

	// On a cluster or behind Sentinel, an enqueue waits out a failover
	// within its callTimeout.
	rdb := queue.FollowFailover(r.Client())
	defer rdb.Close()
	// The asynq client shares rdb, so it needs no closing of its own. A
	// task's key is given a lane of its queue (docs/jobs.md, "The queue side").
	qc := queue.NewClient(asynq.NewClientFromRedisClient(rdb), queue.WithLanes(rdb))

	start := time.Now()
	var progress func(done int)
	if !c.quiet {
		progress = func(done int) { printProgress(stderr, done, c.total(), time.Since(start)) }
	}
	n, err := enqueue(ctx, qc, c, progress)
	elapsed := time.Since(start)

	if !c.quiet || err != nil {
		printSummary(stdout, c, n, elapsed)
	}
	switch {
	case err != nil:
		return cli.Report(stderr, prog, fmt.Errorf("stopped after %d of %d tasks: %w", n.done(), c.total(), err))
	case n.done() < c.total():
		fmt.Fprintf(stderr, "%s: interrupted after %d of %d tasks\n", prog, n.done(), c.total())
		return cli.ExitInterrupted
	}
	return cli.ExitOK
}

// counts is what a run did: tasks put on the queue, and tasks asynq refused
// as duplicates under --unique.
type counts struct {
	enqueued, duplicates int
}

// done is how many tasks the run is through with.
func (n counts) done() int { return n.enqueued + n.duplicates }

// enqueue sends c.count copies of each of c.tasks, in order, with a few
// goroutines, which it waits for. It stops taking new tasks when ctx ends,
// lets the calls in flight finish, and returns how many tasks are on the
// queue, and how many asynq refused as duplicates (--unique). It stops at
// the first failed call and returns its error. progress, if not nil, is
// called every progressEvery while it runs.
func enqueue(ctx context.Context, qc *queue.Client, c config, progress func(done int)) (counts, error) {
	var (
		claimed, done, dups atomic.Int64
		wg                  sync.WaitGroup
		firstErr            error
		errOnce             sync.Once
	)
	total := int64(c.total())
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	// Calls in flight finish even when ctx ends, so that the count is exact.
	callBase := context.WithoutCancel(ctx)

	for range min(senders, total) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				k := claimed.Add(1) - 1
				if k >= total {
					return
				}
				callCtx, cancel := context.WithTimeout(callBase, callTimeout)
				_, err := qc.Enqueue(callCtx, c.tasks[k/int64(c.count)], c.opts...)
				cancel()
				if c.unique && errors.Is(err, asynq.ErrDuplicateTask) {
					dups.Add(1)
					continue
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					stop()
					return
				}
				done.Add(1)
			}
		}()
	}

	finished := make(chan struct{})
	var reporter sync.WaitGroup
	if progress != nil {
		reporter.Add(1)
		go func() {
			defer reporter.Done()
			tick := time.NewTicker(progressEvery)
			defer tick.Stop()
			for {
				select {
				case <-finished:
					return
				case <-tick.C:
					progress(int(done.Load() + dups.Load()))
				}
			}
		}()
	}
	wg.Wait()
	close(finished)
	reporter.Wait()
	return counts{enqueued: int(done.Load()), duplicates: int(dups.Load())}, firstErr
}

// printProgress writes a line such as "enqueued 12000/50000 (24%) 8100/s".
func printProgress(w io.Writer, done, count int, elapsed time.Duration) {
	fmt.Fprintf(w, "enqueued %d/%d (%d%%) %.0f/s\n", done, count, done*100/count, rate(done, elapsed))
}

// printSummary writes a line such as
// "enqueued 500 tasks of type email:send to queue default in 0.12s (4100/s)".
func printSummary(w io.Writer, c config, n counts, elapsed time.Duration) {
	noun := "tasks"
	if n.enqueued == 1 {
		noun = "task"
	}
	fmt.Fprintf(w, "enqueued %d %s of %s to queue %s in %.2fs (%.0f/s)", n.enqueued, noun, c, c.queue, elapsed.Seconds(), rate(n.done(), elapsed))
	if c.in > 0 {
		fmt.Fprintf(w, ", to run in %v", c.in)
	}
	if c.unique {
		fmt.Fprintf(w, "; %d duplicates skipped (--unique)", n.duplicates)
	}
	fmt.Fprintln(w)
}

func rate(n int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(n) / elapsed.Seconds()
}
