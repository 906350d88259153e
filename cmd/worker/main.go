// Command worker is one process of a sluice fleet: it runs jobs from asynq
// queues in Redis, each job taking its tokens from buckets the whole fleet
// shares (in the same or another Redis) before its handler runs.
//
//	worker --redis redis://127.0.0.1:6379/0 --limit 'http:request=50/s,burst=5' \
//	  --metrics-addr 127.0.0.1:9090
//
// It runs the built-in job types http:request (one HTTP request) and sleep (a
// wait, for demos and tests). Run worker --help for the flags. SIGINT or
// SIGTERM stops it gracefully, with a last log line "worker stopped" that
// holds its counts; a second signal exits at once with status 130. It exits 1
// on a runtime failure, such as a Redis it cannot reach at start, and 2 on
// bad usage or input, found before it connects to anything.
package main

import (
	"context"
	"os"

	"github.com/sluicehq/sluice/internal/cli"
)

func main() {
	cli.Main(prog, "running jobs", func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	})
}
