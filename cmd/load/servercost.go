package main

import (
	"context"
	"fmt"
	"io"
	"math"
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
// (peer), measured in turn with single, three times each, the least of each
// kept: on a small machine where the client and the server share the
// cores, a run's figure includes the time the server thread was preempted
// mid-script, and the least of three is the fairest to both.
type costRow struct {
	name                    string
	single, coalesced, peer float64 // µs of server time per decision
}

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

// serverCost measures every policy beside redis_rate's Allow at the token
// bucket's limit, d per run.
func serverCost(ctx context.Context, c config, rdb *redis.Client, d time.Duration, log io.Writer) ([]costRow, error) {
	prefix := fmt.Sprintf("sluice-cost:%d:", time.Now().UnixNano())
	rl := redis_rate.NewLimiter(rdb)
	rlim := redis_rate.Limit{Rate: 1_000_000, Burst: 1 << 20, Period: time.Second}
	peer := func(ctx context.Context) error {
		_, err := rl.Allow(ctx, prefix+"redis_rate", rlim)
		return err
	}
	var rows []costRow
	for _, pp := range costPolicies {
		fmt.Fprintf(log, "load: server cost per decision, %s and redis_rate, %v each, three times...\n", pp.name, d)
		single := throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix(prefix+"single:"), throttle.WithoutCoalescing())
		coalesced := throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix(prefix+"coalesced:"))
		try := func(lim *throttle.Limiter) func(context.Context) error {
			return func(ctx context.Context) error {
				_, err := lim.TryAcquire(ctx, pp.name, pp.p, 1)
				return err
			}
		}
		row := costRow{name: pp.name, single: math.Inf(1), peer: math.Inf(1)}
		for range 3 {
			us, err := perDecision(ctx, c, rdb, d, try(single))
			if err != nil {
				return nil, fmt.Errorf("server cost, %s: %w", pp.name, err)
			}
			row.single = min(row.single, us)
			if us, err = perDecision(ctx, c, rdb, d, peer); err != nil {
				return nil, fmt.Errorf("server cost, redis_rate: %w", err)
			}
			row.peer = min(row.peer, us)
		}
		us, err := perDecision(ctx, c, rdb, d, try(coalesced))
		if err != nil {
			return nil, fmt.Errorf("server cost, %s: %w", pp.name, err)
		}
		row.coalesced = us
		rows = append(rows, row)
	}
	return rows, nil
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
