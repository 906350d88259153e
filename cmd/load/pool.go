package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// poolFigures are no-op jobs per second, through a plain asynq server and
// through a workers.Pool whose limit never denies (its limiter on the same
// Redis: coalesced, not, or with throttle.WithPrefetch; or in process, a
// memory store, which shows what the pool costs without its reserve round
// trip), each the best of three runs taken in turn.
type poolFigures struct {
	asynq, pool, poolSingle, poolPrefetch, poolMemory float64
}

// never is a limit no load here reaches: the pool's cost, not its waiting.
var never = throttle.Limit{Rate: 1e6, Period: time.Second, Burst: 1 << 20}

// poolRates runs c.poolJobs no-op jobs with c.poolConcurrency workers:
// plain asynq, the pool (calls coalesced, as it runs by default), the pool
// with every reserve a round trip of its own, with WithPrefetch(workers), and
// on a memory store; three times each, in turn, the middle round in reverse
// order: on this kind of machine a run's rate depends on what ran just
// before it (measured: the pool in process 1.06–1.37 × plain asynq when
// plain asynq ran first in each round, 0.97–1.17 × when it ran last), and
// turning the order round lets no mode always follow the same one.
func poolRates(ctx context.Context, c config, url string, log io.Writer) (poolFigures, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return poolFigures{}, err
	}
	conn := asynq.RedisClientOpt{Addr: opt.Addr, Username: opt.Username, Password: opt.Password, DB: opt.DB, TLSConfig: opt.TLSConfig}
	var f poolFigures
	modes := []string{"asynq", "pool", "single", "prefetch", "memory"}
	for round := range 3 {
		order := slices.Clone(modes)
		if round == 1 {
			slices.Reverse(order)
		}
		for _, mode := range order {
			fmt.Fprintf(log, "load: %d no-op jobs, %d workers, %s, run %d...\n", c.poolJobs, c.poolConcurrency, mode, round+1)
			rate, err := poolRun(ctx, c, conn, opt, mode)
			if err != nil {
				return poolFigures{}, fmt.Errorf("%s: %w", mode, err)
			}
			switch mode {
			case "asynq":
				f.asynq = max(f.asynq, rate)
			case "pool":
				f.pool = max(f.pool, rate)
			case "single":
				f.poolSingle = max(f.poolSingle, rate)
			case "prefetch":
				f.poolPrefetch = max(f.poolPrefetch, rate)
			default:
				f.poolMemory = max(f.poolMemory, rate)
			}
		}
	}
	return f, nil
}

// poolRun enqueues the jobs on a queue of their own, then times their
// processing, from the server's start to the last job's end.
func poolRun(ctx context.Context, c config, conn asynq.RedisClientOpt, opt *redis.Options, mode string) (float64, error) {
	queue := fmt.Sprintf("sluice-load-%d", time.Now().UnixNano())
	client := asynq.NewClient(conn)
	defer client.Close()
	for i := range c.poolJobs {
		if _, err := client.EnqueueContext(ctx, asynq.NewTask("noop", []byte(fmt.Sprint(i))), asynq.Queue(queue), asynq.MaxRetry(1)); err != nil {
			return 0, err
		}
	}
	var done atomic.Int64
	all := make(chan struct{})
	handle := func(context.Context, *asynq.Task) error {
		if done.Add(1) == int64(c.poolJobs) {
			close(all)
		}
		return nil
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var start time.Time
	var stop func()
	switch mode {
	case "asynq":
		srv := asynq.NewServer(conn, asynq.Config{Concurrency: c.poolConcurrency, Queues: map[string]int{queue: 1},
			TaskCheckInterval: 100 * time.Millisecond, DelayedTaskCheckInterval: 250 * time.Millisecond, LogLevel: asynq.FatalLevel})
		mux := asynq.NewServeMux()
		mux.HandleFunc("noop", handle)
		start = time.Now()
		if err := srv.Start(mux); err != nil {
			return 0, err
		}
		stop = srv.Shutdown
	default:
		lopt := *opt
		lopt.ContextTimeoutEnabled = true
		rdb := redis.NewClient(&lopt)
		defer rdb.Close()
		var lopts []throttle.Option
		lopts = append(lopts, throttle.WithKeyPrefix(queue+":"))
		switch mode {
		case "single":
			lopts = append(lopts, throttle.WithoutCoalescing())
		case "prefetch":
			lopts = append(lopts, throttle.WithPrefetch(c.poolConcurrency))
		}
		var store throttle.Store = throttle.NewRedisStore(rdb)
		if mode == "memory" {
			store = throttle.NewMemoryStore()
		}
		pool, err := workers.NewPool(workers.Config{Redis: conn, Limiter: throttle.NewLimiter(store, lopts...),
			Concurrency: c.poolConcurrency, Queues: map[string]int{queue: 1}, Logger: quiet})
		if err != nil {
			return 0, err
		}
		pool.HandleFunc("noop", handle, &workers.Policy{Name: "noop", Limit: never})
		pctx, cancel := context.WithCancel(ctx)
		ran := make(chan error, 1)
		start = time.Now()
		go func() { ran <- pool.Run(pctx) }()
		stop = func() { cancel(); <-ran }
	}
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		stop()
		return 0, fmt.Errorf("%d of %d jobs done in 5 minutes", done.Load(), c.poolJobs)
	case <-ctx.Done():
		stop()
		return 0, ctx.Err()
	}
	elapsed := time.Since(start)
	stop()
	return float64(c.poolJobs) / elapsed.Seconds(), nil
}
