package main

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// testOptions are the quickstart's options for a run of n jobs, without
// progress lines or logs.
func testOptions(n int) options {
	o := defaultOptions()
	o.RedisURL = ""
	o.Jobs = n
	o.Progress = 0
	o.Logger = slog.New(slog.DiscardHandler)
	o.Timeout = 30 * time.Second
	return o
}

// observed records the handlers' starts and turns.
type observed struct {
	mu    sync.Mutex
	runs  []jobRun
	hosts map[string]int
}

func (ob *observed) observe(host string, start, turn time.Time) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.runs = append(ob.runs, jobRun{start: start, turn: turn})
	if ob.hosts == nil {
		ob.hosts = make(map[string]int)
	}
	ob.hosts[host]++
}

func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	const jobs = 60
	o := testOptions(jobs)
	var ob observed
	o.observe = ob.observe
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, o), out.String())
	t.Log("\n" + out.String())

	// Every job ran once, and the queue was left empty.
	text := out.String()
	assert.Contains(t, text, "summary (in-process miniredis")
	assert.Contains(t, text, "60 of 60 jobs, each once")
	assert.Contains(t, text, "archived 0, failed 0, pending 0, scheduled 0, retry 0, active 0: nothing lost")
	require.Len(t, ob.runs, jobs)
	assert.Len(t, ob.hosts, o.Hosts, "every host ran jobs")

	// No handler started before its turn.
	for i, r := range ob.runs {
		assert.False(t, r.start.Before(r.turn), "run %d started %v before its turn", i, r.turn.Sub(r.start))
	}

	// No over-grant: across the three hosts, no stretch of time t held more
	// turns than Burst + Rate·t. A turn is the slot the job's tokens were
	// granted for (workers.Granted), on the limiter's one clock: no slack
	// beyond the microsecond the store keeps time in.
	rate, burst := perSecond(o.Limit), float64(o.Limit.Burst)
	turns := make([]time.Time, len(ob.runs))
	for i, r := range ob.runs {
		turns[i] = r.turn
	}
	slices.SortFunc(turns, time.Time.Compare)
	for i := range turns {
		for j := i; j < len(turns); j++ {
			d := turns[j].Sub(turns[i])
			require.LessOrEqualf(t, float64(j-i+1), burst+rate*(d+time.Microsecond).Seconds(),
				"turns %d to %d: %d jobs in %v, over the limit", i, j, j-i+1, d)
		}
	}

	// The achieved rate after the burst is at most the limit, and not far
	// below it.
	slices.SortFunc(ob.runs, func(a, b jobRun) int { return a.start.Compare(b.start) })
	span := ob.runs[jobs-1].start.Sub(ob.runs[0].start)
	achieved := (jobs - burst) / span.Seconds()
	assert.LessOrEqual(t, achieved, rate*1.01, "achieved rate after the burst, jobs/s")
	assert.GreaterOrEqual(t, achieved, rate*0.5, "achieved rate after the burst, jobs/s")
}

// With REDIS_URL the quickstart uses that server, and leaves no job behind
// in it.
func TestRunRedisURL(t *testing.T) {
	mr := miniredis.RunT(t)
	o := testOptions(20)
	o.RedisURL = "redis://" + mr.Addr() + "/0"
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, o), out.String())
	assert.Contains(t, out.String(), "summary (Redis at "+mr.Addr()+" (REDIS_URL))")
	assert.Contains(t, out.String(), "20 of 20 jobs, each once")

	// asynq keeps each task in a hash "asynq:{<queue>}:t:<id>" until it is
	// done, so no job is left pending, scheduled, retrying or archived; and
	// the run removed its queue with its counters.
	for _, k := range mr.Keys() {
		assert.False(t, strings.HasPrefix(k, "asynq:{quickstart-"), "key of the run's queue left in Redis: %s", k)
	}
	assert.NotContains(t, mr.Keys(), "asynq:queues", "the run's queue was removed")
}

func TestRunTimeout(t *testing.T) {
	o := testOptions(200) // 8 s at 25/s
	o.Timeout = 2 * time.Second
	var out bytes.Buffer
	err := run(context.Background(), &out, o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not all jobs finished within 2s")
	assert.Contains(t, out.String(), "NOT ALL DONE")
}

func TestRunInterrupted(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	o := testOptions(200)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := time.AfterFunc(2*time.Second, cancel) // as Ctrl-C would
	defer stop.Stop()
	var out bytes.Buffer
	err := run(ctx, &out, o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "interrupted: ")
	assert.Contains(t, err.Error(), "of 200 jobs done; the rest went back to the queue")
}
