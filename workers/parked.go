package workers

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file is the list of the jobs parked until a calendar quota's reset
// (quota.go), one sorted set per task type in the queues' Redis
// (parkedKey): the copies' task ids, scored by the reset they wait for, in
// Unix milliseconds. A job is listed as it is parked (parkPlace), and
// leaves as it comes back (unpark); entries more than parkForget past their
// reset (a job archived or deleted meanwhile) are dropped on the next park,
// and the key expires parkForget after the latest reset plus parkSpread.
// Parked and ParkedIn read it for the status line and sluice limits.

const (
	// parkForget is how long past its reset a listed job is forgotten.
	parkForget = time.Hour
	// parkedPrefix prefixes the sorted set of a type's parked jobs in the
	// queues' Redis: the type follows, in braces (one Cluster slot per type).
	parkedPrefix = "sluice:parked:"
)

func fmtInt(n int64) string { return strconv.FormatInt(n, 10) }

// parkedKey is the key of task type typ's parked jobs.
func parkedKey(typ string) string { return parkedPrefix + "{" + typ + "}" }

// parkPlace lists job j's copy among the jobs parked for until and returns
// how long after until it comes back: its place in that list, parkSpread
// over parkSpreadJobs places; with the list unreadable, a random place.
func (p *Pool) parkPlace(ctx context.Context, j *job, until time.Time) time.Duration {
	step := parkSpread / parkSpreadJobs
	key := parkedKey(j.task.Type())
	due := until.UnixMilli()
	cctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	var rank *redis.IntCmd
	_, err := p.rdb.TxPipelined(cctx, func(tx redis.Pipeliner) error {
		tx.ZRemRangeByScore(cctx, key, "-inf", fmtInt(time.Now().Add(-parkForget).UnixMilli()))
		tx.ZAdd(cctx, key, redis.Z{Score: float64(due), Member: j.meta.CopyID(j.id)})
		rank = tx.ZCount(cctx, key, fmtInt(due), fmtInt(due)) // its place: the jobs parked for until so far
		tx.PExpireAt(cctx, key, until.Add(parkSpread+parkForget))
		return nil
	})
	if err != nil {
		j.logger().Debug("workers: cannot list the parked job; it comes back at a random place", "err", err)
		return time.Duration(rand.Int64N(int64(parkSpread)))
	}
	return time.Duration(min(rank.Val()-1, parkSpreadJobs)) * step
}

// unpark takes job j off its type's list of parked jobs, as it comes back.
func (p *Pool) unpark(ctx context.Context, j *job) {
	cctx, cancel := context.WithTimeout(ctx, cooldownCheckTimeout)
	defer cancel()
	if err := p.rdb.ZRem(cctx, parkedKey(j.task.Type()), j.id).Err(); err != nil {
		j.logger().Debug("workers: cannot take the job off the parked list", "err", err)
	}
}

// Parked is how many jobs of task type typ are parked until a calendar
// quota's reset, and the latest time one of them is due; 0 and the zero
// time if none.
func (p *Pool) Parked(ctx context.Context, typ string) (int, time.Time, error) {
	return ParkedIn(ctx, p.rdb, typ)
}

// ParkedIn is Pool.Parked, read from the queues' Redis rdb (for a process
// that has no Pool: sluice limits).
func ParkedIn(ctx context.Context, rdb redis.UniversalClient, typ string) (int, time.Time, error) {
	key := parkedKey(typ)
	since := fmtInt(time.Now().Add(-parkForget).UnixMilli())
	n, err := rdb.ZCount(ctx, key, since, "+inf").Result()
	if err != nil || n == 0 {
		return 0, time.Time{}, err
	}
	last, err := rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: key, Start: 0, Stop: 0, Rev: true}).Result()
	if err != nil || len(last) == 0 {
		return int(n), time.Time{}, err
	}
	return int(n), time.UnixMilli(int64(last[0].Score)), nil
}
