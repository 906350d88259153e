package workers

import (
	"github.com/sluicehq/sluice/queue"
)

// This file is how a pool serves the family of each queue it is configured
// with (queue.Family: a member per priority and lane), so that asynq
// dequeues the right job first (docs/jobs.md, "The queue side").
//
// asynq tries the queues of a pool in a weighted random order at each fetch
// and takes the first job it finds. A member of priority p weighs
// levelWeight(p) times its queue's configured weight: while both have jobs
// pending, priority 1 is tried first 16 times as often as priority 5, which
// still is tried first in one fetch of 17 (about 6 %): enough for the
// bucket's floor to have low-priority jobs to grant. Lanes of one level
// weigh the same: keys in different lanes are dequeued alike, whatever
// either's backlog.
//
// With Config.StrictPriority, asynq tries the queues in a fixed order: the
// configured queues by weight, and within each, priority 1 to 5. Lanes of
// one level then come in a fixed order too, and a level is only dequeued
// once those above are empty.

// levelWeight is the weight of priority p's members relative to priority 5's.
func levelWeight(p int) int { return 1 << (queue.LowestPriority - p) }

// strictStep separates the configured weights under StrictPriority, above
// every levelWeight.
const strictStep = 2 << (queue.LowestPriority - queue.HighestPriority)

// familyQueues is the asynq queue configuration that serves the families of
// qs, queue name to weight.
func familyQueues(qs map[string]int, strict bool) map[string]int {
	out := make(map[string]int, len(qs)*len(queue.Family("")))
	for base, w := range qs {
		for p := queue.HighestPriority; p <= queue.LowestPriority; p++ {
			weight := w * levelWeight(p)
			if strict {
				weight = w*strictStep + levelWeight(p)
			}
			for lane := range queue.Lanes {
				out[queue.Member(base, p, lane)] = weight
			}
		}
	}
	return out
}
