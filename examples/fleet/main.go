// Fleet runs a fleet of worker processes that share one limit through Redis,
// the way separate hosts would. The program starts itself three more times
// as child processes in the worker role, enqueues jobs, waits for them all to
// run, then stops the workers with SIGTERM (each shuts down gracefully) and
// prints how many jobs each process ran, from their own output, and the
// fleet's rate against the limit: three processes together, not each.
//
//	go run ./examples/fleet
//
// With REDIS_URL=redis://host:port/db every process uses that Redis; without
// it the parent starts an in-process Redis-compatible server (miniredis) and
// passes its address to the workers, in REDIS_URL. On a terminal, Ctrl-C
// stops the parent and the workers together.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

const (
	taskType   = "thumbnail:make"
	policyName = "thumbnails"
)

// limit is the one the whole fleet keeps.
var limit = throttle.Limit{Rate: 30, Burst: 5}

// workerFlags are what the parent tells each worker.
type workerFlags struct {
	name, queue, prefix string
	concurrency         int
	maxWait             time.Duration
}

func main() {
	role := flag.String("role", "parent", "parent, or worker (started by the parent)")
	var wf workerFlags
	flag.StringVar(&wf.name, "name", "worker", "worker: its name in the output")
	flag.StringVar(&wf.queue, "queue", "", "worker: the queue to take jobs from")
	flag.StringVar(&wf.prefix, "prefix", "", "worker: the key prefix of the shared bucket")
	flag.IntVar(&wf.concurrency, "concurrency", 4, "worker: jobs it runs at once")
	flag.DurationVar(&wf.maxWait, "max-wait", time.Second, "worker: how long it holds a job waiting for its turn")
	workers := flag.Int("workers", 3, "parent: worker processes to start")
	jobs := flag.Int("jobs", 180, "parent: jobs to enqueue")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch *role {
	case "parent":
		err = runParent(ctx, os.Stdout, *workers, *jobs, wf)
	case "worker":
		err = runWorker(ctx, os.Stdin, os.Stdout, os.Getenv("REDIS_URL"), wf)
	default:
		err = fmt.Errorf("unknown -role %q", *role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleet (%s): %v\n", *role, err)
		stop()
		os.Exit(1)
	}
}
