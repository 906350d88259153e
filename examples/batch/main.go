// Batch throttles a batch job with a plain throttle.Limiter, no queue: eight
// goroutines re-index 200 records, each blocking in Acquire until Redis says
// its turn has come, so together they keep to 40 records a second. Meanwhile
// an interactive lookup that shares the bucket shows a deadline-aware
// Acquire: with a deadline its turn would pass, Acquire fails at once with a
// *throttle.LimitedError saying when to come back, instead of sleeping just
// to fail.
//
//	go run ./examples/batch
//
// Without REDIS_URL it starts an in-process Redis-compatible server
// (miniredis); with REDIS_URL=redis://host:port/db it uses that Redis.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

const (
	records = 200
	workers = 8
	bucket  = "search-reindex"
)

// limit is the search cluster's budget for re-indexing: 40 records a second,
// 10 at once.
var limit = throttle.Limit{Rate: 40, Burst: 10}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "batch:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rdb, where, closeRedis, err := connect(ctx)
	if err != nil {
		return err
	}
	defer closeRedis()

	// A bucket of this run's own: the prefix keeps runs on a shared Redis apart.
	lim := throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix("sluice:batch:"+runID()+":"))
	fmt.Fprintf(out, "sluice batch: re-index %d records at %g/s (burst %d), %d goroutines blocking in Acquire, on %s\n",
		records, limit.Rate, limit.Burst, workers, where)

	todo := make(chan int, records)
	for id := 1; id <= records; id++ {
		todo <- id
	}
	close(todo)

	var (
		mu    sync.Mutex
		turns []time.Time // when each record's Acquire returned
		byG   [workers]int
	)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range todo {
				// Blocks until this goroutine's token is granted: Redis
				// reserves it and says when; no polling.
				if err := lim.Acquire(ctx, bucket, limit, 1); err != nil {
					errs[g] = fmt.Errorf("record %d: %w", id, err)
					return
				}
				at := time.Now()
				reindex(id)
				mu.Lock()
				turns = append(turns, at)
				byG[g]++
				mu.Unlock()
			}
		}()
	}

	// The interactive lookup, a second in: it shares the bucket with the batch.
	lookupDone := make(chan struct{})
	go func() {
		defer close(lookupDone)
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return
		}
		lookup(ctx, out, lim)
	}()

	wg.Wait()
	<-lookupDone
	if err := errors.Join(errs...); err != nil {
		return err
	}

	slices.SortFunc(turns, time.Time.Compare)
	n := len(turns)
	span := turns[n-1].Sub(turns[0])
	// The lookup took one token too.
	granted := n + 1
	ideal := float64(granted-limit.Burst) / limit.Rate
	steady := float64(granted-limit.Burst) / span.Seconds()
	fmt.Fprintf(out, "\nsummary\n")
	fmt.Fprintf(out, "  re-indexed   %d of %d records in %.2fs (%.2fs with start-up); per goroutine %v\n",
		n, records, span.Seconds(), time.Since(start).Seconds(), byG)
	fmt.Fprintf(out, "  ideal        %.2fs for %d tokens (%d records and the lookup): a burst of %d at once, then %d at %g/s\n",
		ideal, granted, n, limit.Burst, granted-limit.Burst, limit.Rate)
	fmt.Fprintf(out, "  rate         %.1f/s after the burst, %.0f%% of the limit of %g/s\n", steady, 100*steady/limit.Rate, limit.Rate)
	return nil
}

// reindex stands for the real work: a write to the search cluster.
func reindex(int) { time.Sleep(5 * time.Millisecond) }

// lookup asks for one token twice: first with a deadline shorter than the
// batch's queue for the bucket, then with one long enough.
func lookup(ctx context.Context, out io.Writer, lim *throttle.Limiter) {
	for _, budget := range []time.Duration{50 * time.Millisecond, time.Second} {
		lctx, cancel := context.WithTimeout(ctx, budget)
		t0 := time.Now()
		err := lim.Acquire(lctx, bucket, limit, 1)
		took := time.Since(t0)
		cancel()
		var limited *throttle.LimitedError
		switch {
		case errors.As(err, &limited):
			// Nothing was taken; the error says when the same call would be granted.
			fmt.Fprintf(out, "  lookup, deadline %v: refused after %v, not %v: %v (errors.Is ErrLimited: %v)\n",
				budget, took.Round(100*time.Microsecond), budget, err, errors.Is(err, throttle.ErrLimited))
		case err != nil:
			fmt.Fprintf(out, "  lookup, deadline %v: %v\n", budget, err)
		default:
			fmt.Fprintf(out, "  lookup, deadline %v: granted after waiting %v for its turn behind the batch\n",
				budget, took.Round(time.Millisecond))
		}
	}
}

// connect returns a client for REDIS_URL, or for an in-process miniredis
// when it is unset, with a description and a func that closes both.
func connect(ctx context.Context) (*redis.Client, string, func(), error) {
	if url := os.Getenv("REDIS_URL"); url != "" {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, "", nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		opts.ContextTimeoutEnabled = true
		rdb := redis.NewClient(opts)
		if err := rdb.Ping(ctx).Err(); err != nil {
			rdb.Close()
			return nil, "", nil, fmt.Errorf("cannot reach Redis at %s (REDIS_URL): %w", opts.Addr, err)
		}
		return rdb, "Redis at " + opts.Addr, func() { rdb.Close() }, nil
	}
	mr, err := miniredis.Run()
	if err != nil {
		return nil, "", nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	return rdb, "in-process miniredis at " + mr.Addr(), func() { rdb.Close(); mr.Close() }, nil
}

// runID is a short random id that keeps this run's keys apart from others'.
func runID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
