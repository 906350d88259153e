package workers

import (
	"log/slog"
	"sync/atomic"

	"github.com/sluicehq/sluice/queue"
)

// Stats are a pool's counters since NewPool, for a status line or a test. The
// same numbers, by policy, are in the sluice.jobs.* metrics.
type Stats struct {
	Processed int64 // jobs whose handler succeeded
	Failed    int64 // handler failures (asynq retries the job, or archives it: see Archived)
	Requeued  int64 // times a job was sent back to its queue to come back later, for any reason
	Cooldowns int64 // cooldowns put on a bucket after an upstream 429 or 503
	Archived  int64 // jobs archived in the pool's hands: by the pool (past the horizon, no bucket key) or by asynq after a last failure
	Waiting   int64 // jobs waiting in this process for their turn or an in-flight slot, now
	Active    int64 // jobs in the pool's hands now: waiting, running their handler, or going back
	// WaitingByPriority splits Waiting by the jobs' priority: index 0 is
	// priority 1 (queue.HighestPriority), index 4 priority 5.
	WaitingByPriority [queue.LowestPriority - queue.HighestPriority + 1]int64
}

// LogValue lets a Stats be logged as one group.
func (s Stats) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int64("processed", s.Processed),
		slog.Int64("failed", s.Failed),
		slog.Int64("requeued", s.Requeued),
		slog.Int64("cooldowns", s.Cooldowns),
		slog.Int64("archived", s.Archived),
		slog.Int64("waiting", s.Waiting),
	)
}

type stats struct {
	processed, failed, requeued, cooldowns, archived, waiting, active atomic.Int64
	waitingBy                                                         [queue.LowestPriority - queue.HighestPriority + 1]atomic.Int64 // by priority, from 1
}

// Stats returns the pool's counters. It is safe to call at any time, from any
// goroutine; each counter is read atomically, the set as a whole is not.
func (p *Pool) Stats() Stats {
	var by [len(p.stats.waitingBy)]int64
	for i := range by {
		by[i] = p.stats.waitingBy[i].Load()
	}
	return Stats{
		WaitingByPriority: by,
		Processed:         p.stats.processed.Load(),
		Failed:            p.stats.failed.Load(),
		Requeued:          p.stats.requeued.Load(),
		Cooldowns:         p.stats.cooldowns.Load(),
		Archived:          p.stats.archived.Load(),
		Waiting:           p.stats.waiting.Load(),
		Active:            p.stats.active.Load(),
	}
}

// WaitingByPriority returns, by policy name, how many jobs wait in this
// process now for their turn or an in-flight slot at each job priority
// (index 0 is priority 1); policies with none are left out.
func (p *Pool) WaitingByPriority() map[string][5]int64 {
	out := make(map[string][5]int64)
	for _, rt := range p.routes {
		if rt.name == "" || rt.waiting.Load() == 0 {
			continue
		}
		by := out[rt.name]
		for i := range by {
			by[i] += rt.waitingBy[i].Load()
		}
		out[rt.name] = by
	}
	return out
}

// WaitingByPolicy returns, by policy name, how many jobs wait in this
// process now for their turn or an in-flight slot; policies with none are
// left out.
func (p *Pool) WaitingByPolicy() map[string]int64 {
	out := make(map[string]int64)
	for _, rt := range p.routes {
		if n := rt.waiting.Load(); n > 0 && rt.name != "" {
			out[rt.name] += n
		}
	}
	return out
}
