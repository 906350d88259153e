package queue

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Depth is what one named queue holds, summed over its family (Family).
type Depth struct {
	Name      string
	Pending   int
	Scheduled int
	Retry     int
	Active    int
	Archived  int
	// ByPriority is pending, scheduled and retry by job priority (index 0
	// is priority 1, HighestPriority).
	ByPriority [LowestPriority - HighestPriority + 1]int
}

// Queued is the jobs waiting to run: pending, scheduled and retry.
func (d Depth) Queued() int { return d.Pending + d.Scheduled + d.Retry }

// Depths reads the depths of the named queues of the queue Redis rdb, each
// summed over its family. It reads the counts of asynq v0.26's keys, one
// pipeline per queue (asynq's Inspector would run a script with memory
// sampling for each of a family's 20 members). A queue that cannot be read
// is left out, with its error; a queue that does not exist has depth 0.
// ctx bounds the calls.
func Depths(ctx context.Context, rdb redis.UniversalClient, names []string) ([]Depth, []error) {
	type counts struct {
		member                     string
		pending, active            *redis.IntCmd
		scheduled, retry, archived *redis.IntCmd
	}
	var out []Depth
	var errs []error
	for _, q := range names {
		var cs []counts
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, m := range Family(q) {
				k := "asynq:{" + m + "}:"
				cs = append(cs, counts{m, p.LLen(ctx, k+"pending"), p.LLen(ctx, k+"active"),
					p.ZCard(ctx, k+"scheduled"), p.ZCard(ctx, k+"retry"), p.ZCard(ctx, k+"archived")})
			}
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("queue %s: %w", q, err))
			continue
		}
		d := Depth{Name: q}
		for _, c := range cs {
			pending, scheduled, retry := int(c.pending.Val()), int(c.scheduled.Val()), int(c.retry.Val())
			d.Pending += pending
			d.Scheduled += scheduled
			d.Retry += retry
			d.Active += int(c.active.Val())
			d.Archived += int(c.archived.Val())
			if n := pending + scheduled + retry; n > 0 {
				_, p, _, _ := ParseMember(c.member)
				d.ByPriority[p-HighestPriority] += n
			}
		}
		out = append(out, d)
	}
	return out, errs
}
