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
	Refused   int64 // upstream 429 or 503 answers to the handlers (not the jobs sent back for a cooldown already on)
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
		slog.Int64("refused", s.Refused),
		slog.Int64("waiting", s.Waiting),
	)
}

type stats struct {
	counts          routeStats
	waiting, active atomic.Int64
	waitingBy       [queue.LowestPriority - queue.HighestPriority + 1]atomic.Int64 // by priority, from 1
}

// counter is one of the counters the pool keeps both pool-wide and per
// route (routeStats): outcome, requeued and cooledDown add to both (count).
type counter int

const (
	cProcessed counter = iota
	cFailed
	cRequeued
	cCooldowns
	cArchived
	cRefused
	numCounters
)

type routeStats [numCounters]atomic.Int64

// count adds one to counter c, pool-wide and for route rt.
func (p *Pool) count(rt *route, c counter) {
	p.stats.counts[c].Add(1)
	rt.st[c].Add(1)
}

// stats returns the counters of s as a Stats.
func (s *routeStats) stats() Stats {
	return Stats{
		Processed: s[cProcessed].Load(),
		Failed:    s[cFailed].Load(),
		Requeued:  s[cRequeued].Load(),
		Cooldowns: s[cCooldowns].Load(),
		Archived:  s[cArchived].Load(),
		Refused:   s[cRefused].Load(),
	}
}

// Stats returns the pool's counters. It is safe to call at any time, from any
// goroutine; each counter is read atomically, the set as a whole is not.
func (p *Pool) Stats() Stats {
	var by [len(p.stats.waitingBy)]int64
	for i := range by {
		by[i] = p.stats.waitingBy[i].Load()
	}
	st := p.stats.counts.stats()
	st.WaitingByPriority = by
	st.Waiting = p.stats.waiting.Load()
	st.Active = p.stats.active.Load()
	return st
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

// StatsByPolicy returns the counters of each policy, by name, summed over
// the task types it throttles: Processed, Failed, Requeued, Cooldowns,
// Archived, Refused, Waiting and WaitingByPriority (Active is pool-wide
// only, and 0 here). Unthrottled types are left out. It is safe to call at
// any time, from any goroutine, as Stats.
func (p *Pool) StatsByPolicy() map[string]Stats {
	out := make(map[string]Stats)
	for _, rt := range p.routes {
		if rt.name == "" {
			continue
		}
		s, c := out[rt.name], rt.st.stats()
		s.Processed += c.Processed
		s.Failed += c.Failed
		s.Requeued += c.Requeued
		s.Cooldowns += c.Cooldowns
		s.Archived += c.Archived
		s.Refused += c.Refused
		s.Waiting += rt.waiting.Load()
		for i := range s.WaitingByPriority {
			s.WaitingByPriority[i] += rt.waitingBy[i].Load()
		}
		out[rt.name] = s
	}
	return out
}
