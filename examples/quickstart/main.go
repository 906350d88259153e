// Quickstart runs the main job of sluice on one machine: three worker pools,
// as if on three hosts, work through a few hundred jobs under one limit that
// they share through Redis, and it shows the fleet never going over it.
//
//	go run ./examples/quickstart
//
// It needs nothing but Go: without REDIS_URL it starts an in-process
// Redis-compatible server (miniredis). With REDIS_URL=redis://host:port/db it
// uses that Redis instead, in a queue and bucket of its own that it removes
// at the end. It prints its progress once a second and a summary at the end,
// and exits 0 once every job has run, or 1 if they have not all run within a
// minute. Ctrl-C ends the run early, shutting the pools down gracefully.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// options are the knobs of one run.
type options struct {
	RedisURL    string         // "" starts an in-process miniredis
	Jobs        int            // jobs to enqueue
	Hosts       int            // worker pools, one per pretend host
	Concurrency int            // workers per pool
	Limit       throttle.Limit // the one limit every pool shares
	MaxWait     time.Duration  // how long a worker holds a job waiting for its turn
	Work        time.Duration  // fake work per job, at most
	Timeout     time.Duration  // the whole run, enqueue to summary
	Progress    time.Duration  // how often to print a progress line; 0: never
	Logger      *slog.Logger   // the pools' logs (asynq's too)

	// observe, if set, is called by every handler as it starts, with the pool
	// ("host") it runs in and the time its tokens were granted (see
	// tally.handler): the test uses it to check the limit.
	observe func(host string, start, turn time.Time)
}

func defaultOptions() options {
	return options{
		RedisURL:    os.Getenv("REDIS_URL"),
		Jobs:        300,
		Hosts:       3,
		Concurrency: 4,
		Limit:       throttle.Limit{Rate: 25, Burst: 5},
		MaxWait:     200 * time.Millisecond,
		Work:        20 * time.Millisecond,
		Timeout:     time.Minute,
		Progress:    time.Second,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, defaultOptions()); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		stop()
		os.Exit(1)
	}
}
