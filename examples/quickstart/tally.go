package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/workers"
)

// taskType is the demo job: render one report.
const taskType = "report:render"

// report is the demo job's payload.
type report struct {
	ID     int    `json:"id"`
	Format string `json:"format"`
}

// tally counts what the handlers did, across every pool.
type tally struct {
	total int
	mu    sync.Mutex
	done  map[int]bool   // report ids whose handler succeeded
	calls int            // handler runs, a job run twice included
	byRun map[string]int // successful runs by host
	runs  []jobRun       // every successful run
	all   chan struct{}  // closed once every report is done
}

func newTally(total int) *tally {
	return &tally{total: total, done: make(map[int]bool, total), byRun: make(map[string]int), all: make(chan struct{})}
}

// handler is host's asynq handler: it does a little fake work and counts it.
func (t *tally) handler(host string, work time.Duration, observe func(host string, start, turn time.Time)) func(context.Context, *asynq.Task) error {
	return func(ctx context.Context, task *asynq.Task) error {
		start := time.Now()
		// When this job's tokens were granted: its turn's slot on the
		// limiter's clock, the one clock every host's turns are booked on.
		turn, ok := workers.Granted(ctx)
		if !ok {
			return fmt.Errorf("%s: ran without a turn: %w", taskType, asynq.SkipRetry)
		}
		// Whether it went back to the queue holding its turn, and came back.
		m, _ := queue.MetaOf(task)
		ticket := !m.Slot.IsZero()
		if observe != nil {
			observe(host, start, turn)
		}
		var r report
		if err := json.Unmarshal(task.Payload(), &r); err != nil {
			return fmt.Errorf("%s: bad payload: %w: %w", taskType, err, asynq.SkipRetry)
		}
		// Rendering the report.
		timer := time.NewTimer(work/2 + rand.N(work/2+1))
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		t.record(host, r.ID, jobRun{start: start, turn: turn, ticket: ticket})
		return nil
	}
}

// jobRun is one successful run of a job.
type jobRun struct {
	start  time.Time // the handler started
	turn   time.Time // the slot the job's tokens were granted for, on the limiter's clock (workers.Granted)
	ticket bool      // the job went back to the queue holding its turn, and came back
}

func (t *tally) record(host string, id int, r jobRun) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls++
	t.byRun[host]++
	t.runs = append(t.runs, r)
	if t.done[id] {
		return
	}
	t.done[id] = true
	if len(t.done) == t.total {
		close(t.all)
	}
}

// snapshot is a consistent copy of a tally's counts.
type snapshot struct {
	done   int            // jobs done
	calls  int            // successful handler runs: done, plus any job run twice
	byHost map[string]int // successful runs by host
	runs   []jobRun       // every successful run, by start
}

func (t *tally) snapshot() snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	runs := slices.Clone(t.runs)
	slices.SortFunc(runs, func(a, b jobRun) int { return a.start.Compare(b.start) })
	return snapshot{done: len(t.done), calls: t.calls, byHost: maps.Clone(t.byRun), runs: runs}
}
