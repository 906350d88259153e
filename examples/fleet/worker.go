package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// The worker's output, one line each, read by the parent:
//
//	ready                  the pool is taking jobs
//	job <id> <unix µs>     the handler of job <id> started then
//	processed <n>          on exit, after a graceful shutdown: the pool's count
const (
	lineReady     = "ready"
	lineJob       = "job"
	lineProcessed = "processed"
)

// thumbnail is the job's payload.
type thumbnail struct {
	ID int `json:"id"`
}

// runWorker runs one worker process: a pool on queue wf.queue whose jobs take
// tokens from the fleet's bucket, until ctx ends (SIGTERM or Ctrl-C) or stdin
// closes (the parent is gone).
func runWorker(ctx context.Context, stdin io.Reader, out io.Writer, redisURL string, wf workerFlags) error {
	if redisURL == "" || wf.queue == "" || wf.prefix == "" {
		return errors.New("a worker needs REDIS_URL, -queue and -prefix: it is started by the parent")
	}
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	defer rdb.Close()

	pool, err := workers.NewPool(workers.Config{
		Redis:                    asynqOpt(opts),
		Limiter:                  throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix(wf.prefix)),
		Concurrency:              wf.concurrency,
		Queues:                   map[string]int{wf.queue: 1},
		MaxWait:                  wf.maxWait,
		DelayedTaskCheckInterval: 100 * time.Millisecond,
		TaskCheckInterval:        100 * time.Millisecond,
		ShutdownTimeout:          5 * time.Second,
		Logger:                   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("worker", wf.name),
	})
	if err != nil {
		return err
	}
	var mu sync.Mutex // one line at a time on out
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
	pool.HandleFunc(taskType, func(ctx context.Context, t *asynq.Task) error {
		var th thumbnail
		if err := json.Unmarshal(t.Payload(), &th); err != nil {
			return fmt.Errorf("bad payload: %w: %w", err, asynq.SkipRetry)
		}
		say("%s %d %d", lineJob, th.ID, time.Now().UnixMicro())
		time.Sleep(10 * time.Millisecond) // making the thumbnail
		return nil
	}, &workers.Policy{Name: policyName, Limit: limit})

	if err := pool.Start(); err != nil {
		_ = pool.Shutdown(context.Background())
		return err
	}
	say(lineReady)

	// The parent holds our stdin open; if it dies, we stop too.
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, bufio.NewReader(stdin))
		close(gone)
	}()
	select {
	case <-ctx.Done():
	case <-gone:
	}

	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := pool.Shutdown(sctx); err != nil {
		return err
	}
	say("%s %d", lineProcessed, pool.Stats().Processed)
	return nil
}

// asynqOpt is the Redis of opts for asynq.
func asynqOpt(opts *redis.Options) asynq.RedisClientOpt {
	o := asynq.RedisClientOpt{Network: opts.Network, Addr: opts.Addr, Username: opts.Username, Password: opts.Password, DB: opts.DB}
	if opts.TLSConfig != nil {
		o.TLSConfig = opts.TLSConfig.Clone()
	}
	return o
}
