package main

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/queue"
)

// idleComeBack is how long a job of a type this worker does not run waits
// in its queue before it is offered to a worker again.
const idleComeBack = 30 * time.Second

// runnable checks which built-in types the worker runs: each needs a limit
// or an --unlimited naming it, so that no type runs unthrottled by accident.
// A limit or --unlimited for a type the worker does not know, or a type
// given both, is a usage error; so is a worker that would run no type. The
// other types are not run: their jobs go back to the queue (see idle).
func runnable(c config, limits []limit, handlers map[string]asynq.Handler) (idle []string, err error) {
	known := make([]string, 0, len(handlers))
	for t := range handlers {
		known = append(known, t)
	}
	sort.Strings(known)
	runs := strings.Join(known, " and ")
	limited := make(map[string]bool, len(limits))
	for _, l := range limits {
		if handlers[l.spec.Name] == nil {
			return nil, cli.Usagef("%s: this worker has no job type %q (it runs %s)", l.source, l.spec.Name, runs)
		}
		limited[l.spec.Name] = true
	}
	free := make(map[string]bool, len(c.unlimited))
	for _, t := range c.unlimited {
		switch {
		case handlers[t] == nil:
			return nil, cli.Usagef("--unlimited %q: this worker has no job type %q (it runs %s)", t, t, runs)
		case limited[t]:
			return nil, cli.Usagef("--unlimited %q: the type also has a limit; give one or the other", t)
		}
		free[t] = true
	}
	for _, t := range known {
		if !limited[t] && !free[t] {
			idle = append(idle, t)
		}
	}
	if len(idle) == len(known) {
		return nil, cli.Usagef("no limit for any job type, and no --unlimited: this worker would run nothing.\n" +
			"Give a limit, e.g. --limit 'http:request=50/s', or name a type to run without one, e.g. --unlimited sleep")
	}
	return idle, nil
}

// idleHandler answers a job of a type this worker does not run: it goes back
// to its queue for idleComeBack, for a worker that runs it, and is never
// dropped. The first such job of the type is logged as a warning.
func idleHandler(typ string, log *slog.Logger) asynq.Handler {
	var once sync.Once
	return asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		once.Do(func() {
			log.Warn(fmt.Sprintf("a job of type %s arrived, but this worker has no limit for %s and no --unlimited %s: "+
				"such jobs go back to their queue for %v, for a worker that runs them", typ, typ, typ, idleComeBack))
		})
		return queue.Throttled(idleComeBack, "this worker does not run "+typ+" jobs (no limit for the type)")
	})
}
