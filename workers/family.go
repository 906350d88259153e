package workers

import (
	"github.com/sluicehq/sluice/queue"
)

// This file is how a pool serves the family of each queue it is configured
// with (queue.Family: a member per priority and lane), so that asynq
// dequeues the right job first (docs/jobs.md, "The queue side").
//
// asynq is given every member of each configured queue, at the queue's own
// weight: it still picks among the configured queues as before (weighted,
// or under Config.StrictPriority in order of weight). Which member of the
// family a fetch takes a job from is chooser's (dequeue.go): among the
// members that may have jobs, the highest priority, its lanes alike, but
// for one fetch in 12 (8 %), which goes to the lower priorities, drawn by
// levelWeight: enough for the bucket's floor (5 % by default) to have
// low-priority jobs to grant. Lanes of one level are taken alike: keys in
// different lanes are dequeued alike, whatever either's backlog. Under
// StrictPriority the highest priority with jobs is always taken.

// levelWeight is the weight of priority p's members relative to priority
// 5's, when a fetch goes to the priorities below the highest with jobs.
func levelWeight(p int) int { return 1 << (queue.LowestPriority - p) }

// familyQueues is the asynq queue configuration that serves the families of
// qs, queue name to weight: each member at its queue's weight.
func familyQueues(qs map[string]int) map[string]int {
	out := make(map[string]int, len(qs)*len(queue.Family("")))
	for base, w := range qs {
		for _, m := range queue.Family(base) {
			out[m] = w
		}
	}
	return out
}
