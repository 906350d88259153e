package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// costRow is the Redis server's CPU per decision of one policy, read from
// INFO commandstats (the usec of EVALSHA and EVAL) over runs of TryAcquire
// from c.tryers goroutines: each call a store call of its own (single), and
// as the Limiter runs by default (coalesced); beside it redis_rate's Allow
// (peer). Single and peer are measured in pairs, costRounds of them, the
// order turned round in every other pair; ratio is the median of the pairs'
// ratios, lo and hi the least and the most. On a small machine where the
// client and the server share the cores, a run's figure includes the time
// the server thread was preempted mid-script, and the machine's speed
// drifts from one second to the next: a pair's two runs see about the same
// machine, and the median drops the pairs one of whose runs was hit.
type costRow struct {
	name                    string
	single, coalesced, peer float64 // µs of server time per decision, medians
	ratio, lo, hi           float64 // single/peer: median, least and most of the pairs
}

// costRounds is how many pairs of runs each row takes.
const costRounds = 5

// costPolicies are the policies measured, with limits that let most calls
// through at the rates one Redis serves here.
var costPolicies = []struct {
	name string
	p    throttle.Policy
}{
	{"Limit", throttle.Limit{Rate: 1e6, Period: time.Second, Burst: 1 << 20}},
	{"FixedWindow", throttle.FixedWindow{Max: 1 << 20, Window: time.Second}},
	{"LeakyBucket", throttle.LeakyBucket{Rate: 1e6, Period: time.Second, Capacity: 1 << 20}},
	{"SlidingWindow", throttle.SlidingWindow{Max: 1 << 20, Window: time.Second, Slots: 10}},
	{"SlidingLog", throttle.SlidingLog{Max: 10_000, Window: 50 * time.Millisecond}},
}

// controlRow names the row that measures redis_rate against itself (on a
// key of its own): how far from 1 the ratio of two runs of the same script
// strays on this machine, the noise the other rows' ratios carry.
const controlRow = "redis_rate itself"

// serverCost measures every policy beside redis_rate's Allow at the token
// bucket's limit, and redis_rate beside itself, d per run.
func serverCost(ctx context.Context, c config, rdb *redis.Client, d time.Duration, log io.Writer) ([]costRow, error) {
	prefix := fmt.Sprintf("sluice-cost:%d:", time.Now().UnixNano())
	rl := redis_rate.NewLimiter(rdb)
	rlim := redis_rate.Limit{Rate: 1_000_000, Burst: 1 << 20, Period: time.Second}
	allow := func(key string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := rl.Allow(ctx, prefix+key, rlim)
			return err
		}
	}
	peer := allow("redis_rate")
	var rows []costRow
	for _, pp := range costPolicies {
		fmt.Fprintf(log, "load: server cost per decision, %s and redis_rate, %v each, %d pairs...\n", pp.name, d, costRounds)
		single := throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix(prefix+"single:"), throttle.WithoutCoalescing())
		coalesced := throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix(prefix+"coalesced:"))
		try := func(lim *throttle.Limiter) func(context.Context) error {
			return func(ctx context.Context) error {
				_, err := lim.TryAcquire(ctx, pp.name, pp.p, 1)
				return err
			}
		}
		row, err := costPairs(ctx, c, rdb, d, pp.name, try(single), peer)
		if err != nil {
			return nil, err
		}
		if row.coalesced, err = perDecision(ctx, c, rdb, d, try(coalesced)); err != nil {
			return nil, fmt.Errorf("server cost, %s: %w", pp.name, err)
		}
		rows = append(rows, row)
	}
	fmt.Fprintf(log, "load: server cost per decision, redis_rate and itself, %v each, %d pairs...\n", d, costRounds)
	row, err := costPairs(ctx, c, rdb, d, controlRow, allow("redis_rate-again"), peer)
	if err != nil {
		return nil, err
	}
	return append(rows, row), nil
}

// costPairs measures single and peer in costRounds pairs of runs.
func costPairs(ctx context.Context, c config, rdb *redis.Client, d time.Duration, name string, single, peer func(context.Context) error) (costRow, error) {
	var us, them, ratios []float64
	for i := range costRounds {
		var a, b float64
		var err error
		if i%2 == 0 {
			if a, err = perDecision(ctx, c, rdb, d, single); err == nil {
				b, err = perDecision(ctx, c, rdb, d, peer)
			}
		} else {
			if b, err = perDecision(ctx, c, rdb, d, peer); err == nil {
				a, err = perDecision(ctx, c, rdb, d, single)
			}
		}
		if err != nil {
			return costRow{}, fmt.Errorf("server cost, %s: %w", name, err)
		}
		us, them, ratios = append(us, a), append(them, b), append(ratios, a/b)
	}
	row := costRow{name: name, single: median(us), peer: median(them), ratio: median(ratios)}
	row.lo, row.hi = slices.Min(ratios), slices.Max(ratios)
	return row, nil
}

// median is the middle of xs (an odd count; pct on a sorted copy), xs left
// as it was.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return pct(s, 0.5)
}

// perDecision runs call from c.tryers goroutines for d and returns the
// server's µs of script time per call, from INFO commandstats.
func perDecision(ctx context.Context, c config, rdb *redis.Client, d time.Duration, call func(context.Context) error) (float64, error) {
	if err := call(ctx); err != nil { // the script loaded, the key made
		return 0, err
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return 0, err
	}
	calls, err := count(ctx, c.tryers, d, call)
	if err != nil {
		return 0, err
	}
	usec, err := scriptUsec(ctx, rdb)
	if err != nil {
		return 0, err
	}
	if calls == 0 {
		return 0, fmt.Errorf("no calls in %v", d)
	}
	return usec / float64(calls), nil
}

// scriptUsec is the server time spent in EVALSHA and EVAL since the last
// CONFIG RESETSTAT, in µs.
func scriptUsec(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var usec float64
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		_, fields, _ := strings.Cut(line, ":")
		for _, f := range strings.Split(fields, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0, fmt.Errorf("commandstats %q: %w", line, err)
				}
				usec += x
			}
		}
	}
	return usec, nil
}
