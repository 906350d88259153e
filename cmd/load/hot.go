package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// The hot-key experiments (issue #14): two processes, this one and a child
// (this binary run with the hidden --child flag), each with --hot-workers
// goroutines on one bucket for --hot-duration, started together:
//
//   - eval: a trivial one-key EVALSHA in a loop, the raw ceiling of one
//     Redis thread serving one key;
//   - redis_rate: go-redis/redis_rate's Allow in a loop, at the same limit;
//   - single: sluice's Acquire, every call a store call of its own;
//   - coalesced: sluice's Acquire as it runs by default, calls of one
//     bucket sharing round trips.
var hotModes = []string{"eval", "redis_rate", "single", "coalesced"}

// hotResult is one process's part of a hot-key experiment.
type hotResult struct {
	Calls  int64   `json:"calls"`  // calls made (EVALSHA, Allow, Acquire)
	Grants int64   `json:"grants"` // tokens granted
	Trips  int64   `json:"trips"`  // Redis round trips
	Bins   []int64 `json:"bins"`   // grants per millisecond from the start
	Err    string  `json:"err,omitempty"`
}

// hotFigures is an experiment over both processes.
type hotFigures struct {
	callsPerSec, grantsPerSec, tripsPerGrant float64
	over                                     int64 // the most grants beyond Burst + Rate·t at any millisecond
}

// hot runs every hot-key experiment against url and returns them by mode.
func hot(ctx context.Context, c config, url string, log io.Writer) (map[string]hotFigures, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	out := make(map[string]hotFigures)
	for _, mode := range hotModes {
		fmt.Fprintf(log, "load: hot key, %s: 2 processes × %d goroutines, %v...\n", mode, c.hotWorkers, c.hotFor)
		prefix := fmt.Sprintf("sluice-hot:%d:", time.Now().UnixNano())
		start := time.Now().Add(500 * time.Millisecond) // time for the child to start
		child := exec.CommandContext(ctx, self, "--child", mode, "--redis", url,
			"--hot-workers", strconv.Itoa(c.hotWorkers), "--hot-duration", c.hotFor.String(),
			"--hot-rate", strconv.FormatFloat(c.hotRate, 'g', -1, 64), "--hot-burst", strconv.Itoa(c.hotBurst),
			"--child-start", strconv.FormatInt(start.UnixNano(), 10), "--child-prefix", prefix)
		child.Stderr = log
		var childOut []byte
		var childErr error
		done := make(chan struct{})
		go func() { childOut, childErr = child.Output(); close(done) }()
		mine := hotPart(ctx, c, url, mode, prefix, start)
		<-done
		if childErr != nil {
			return nil, fmt.Errorf("hot key %s: child: %w", mode, childErr)
		}
		var theirs hotResult
		if err := json.Unmarshal(childOut, &theirs); err != nil {
			return nil, fmt.Errorf("hot key %s: child's report: %w", mode, err)
		}
		for _, r := range []hotResult{mine, theirs} {
			if r.Err != "" {
				return nil, fmt.Errorf("hot key %s: %s", mode, r.Err)
			}
		}
		out[mode] = merge(c, mine, theirs)
	}
	return out, nil
}

// merge adds two processes' parts up.
func merge(c config, a, b hotResult) hotFigures {
	secs := c.hotFor.Seconds()
	f := hotFigures{
		callsPerSec:  float64(a.Calls+b.Calls) / secs,
		grantsPerSec: float64(a.Grants+b.Grants) / secs,
	}
	if g := a.Grants + b.Grants; g > 0 {
		f.tripsPerGrant = float64(a.Trips+b.Trips) / float64(g)
	}
	var sum int64
	for i := range max(len(a.Bins), len(b.Bins)) {
		if i < len(a.Bins) {
			sum += a.Bins[i]
		}
		if i < len(b.Bins) {
			sum += b.Bins[i]
		}
		// By the end of millisecond i the bucket may have granted at most this.
		bound := int64(c.hotBurst) + int64(c.hotRate*float64(i+1)/1000)
		f.over = max(f.over, sum-bound)
	}
	return f
}

// runChild is the child's side: one part, as JSON on stdout.
func runChild(ctx context.Context, c config, stdout io.Writer) int {
	r := hotPart(ctx, c, c.redisURL, c.child, c.childPrefix, time.Unix(0, c.childStart))
	if err := json.NewEncoder(stdout).Encode(r); err != nil {
		return 1
	}
	return 0
}

// hotPart is one process's part of experiment mode: from start, for
// c.hotFor, c.hotWorkers goroutines on one bucket under prefix.
func hotPart(ctx context.Context, c config, url, mode, prefix string, start time.Time) hotResult {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return hotResult{Err: err.Error()}
	}
	opt.ContextTimeoutEnabled = true
	opt.PoolSize = c.hotWorkers + 8
	trips := &roundTrips{}
	rdb := redis.NewClient(opt)
	rdb.AddHook(trips)
	defer rdb.Close()

	limit := throttle.Limit{Rate: c.hotRate, Period: time.Second, Burst: c.hotBurst}
	var call func(context.Context) (int, error)
	switch mode {
	case "eval":
		trivial := redis.NewScript(`return redis.call("GET", KEYS[1])`)
		key := prefix + "trivial"
		call = func(ctx context.Context) (int, error) {
			if err := trivial.Run(ctx, rdb, []string{key}).Err(); err != nil && err != redis.Nil {
				return 0, err
			}
			return 0, nil
		}
	case "redis_rate":
		rl := redis_rate.NewLimiter(rdb)
		rlim := redis_rate.Limit{Rate: int(c.hotRate), Burst: c.hotBurst, Period: time.Second}
		call = func(ctx context.Context) (int, error) {
			res, err := rl.Allow(ctx, prefix+"hot", rlim)
			if err != nil {
				return 0, err
			}
			return res.Allowed, nil
		}
	case "single", "coalesced":
		opts := []throttle.Option{throttle.WithKeyPrefix(prefix)}
		if mode == "single" {
			opts = append(opts, throttle.WithoutCoalescing())
		}
		lim := throttle.NewLimiter(throttle.NewRedisStore(rdb), opts...)
		call = func(ctx context.Context) (int, error) {
			if err := lim.Acquire(ctx, "hot", limit, 1); err != nil {
				return 0, err
			}
			return 1, nil
		}
	default:
		return hotResult{Err: fmt.Sprintf("no experiment %q", mode)}
	}
	// Connections up and scripts loaded before the start.
	for range 2 {
		if _, err := call(ctx); err != nil {
			return hotResult{Err: err.Error()}
		}
	}
	// Their tokens are back long before the start, on a bucket that refills
	// in Burst/Rate (10 ms by default): the bucket is full at the start.
	time.Sleep(time.Until(start))

	bins := int(c.hotFor/time.Millisecond) + 1
	trips0 := trips.n.Load()
	var calls, grants atomic.Int64
	var mu sync.Mutex
	all := make([]int64, bins)
	var firstErr error
	var wg sync.WaitGroup
	for range c.hotWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]int64, bins)
			var n, g int64
			for {
				got, err := call(ctx)
				at := time.Since(start)
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					break
				}
				if at >= c.hotFor {
					break // past the window: not counted
				}
				n++
				g += int64(got)
				mine[int(at/time.Millisecond)] += int64(got)
			}
			calls.Add(n)
			grants.Add(g)
			mu.Lock()
			for i, v := range mine {
				all[i] += v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	r := hotResult{Calls: calls.Load(), Grants: grants.Load(), Trips: trips.n.Load() - trips0, Bins: all}
	if firstErr != nil {
		r.Err = firstErr.Error()
	}
	return r
}
