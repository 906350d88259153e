package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

type report struct {
	basic                       bool // the figures of measure are in
	rtPerGrant, refRTPerGrant   float64
	granted                     int
	allowed                     float64
	utilisation, refUtilisation float64
	overGrants, refOverGrants   int
	jain, refJain               float64
	lateP50, lateP99, lateMax   time.Duration
	tryPerSec, evalPerSec       float64
	memNs                       float64
	memAllocs                   int64
	idleKey                     string
	idleBytes                   int64
	idleTTL                     time.Duration
	hot                         map[string]hotFigures // by mode (hot.go)
	cost                        []costRow             // by policy (servercost.go)
	pool                        poolFigures           // pool.go
}

// run of one contention experiment.
type contention struct {
	grants    []time.Duration // since start
	perWorker []int
	late      []time.Duration
	// Steady state: round trips after the warm-up (which pays for connection
	// set-up: HELLO, CLIENT SETINFO, the first script load) per call started
	// after it; every started call runs to its grant.
	steadyTrips, steadyGrants int64
}

// warmUp is left out of the round-trip figure.
const warmUp = time.Second

func measure(ctx context.Context, c config, rdb *redis.Client, trips *roundTrips, log io.Writer) (*report, error) {
	prefix := fmt.Sprintf("sluice-load:%d:", time.Now().UnixNano())
	lim := throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix(prefix))
	limit := throttle.Limit{Rate: c.rate, Period: time.Second, Burst: c.burst}
	r := &report{basic: true}

	fmt.Fprintf(log, "load: %d goroutines Acquire on one bucket for %v...\n", c.workers, c.duration)
	got, err := contend(ctx, c, trips, func(ctx context.Context) (time.Duration, error) {
		res, err := lim.Reserve(ctx, "acquire", limit, 1, -1)
		if err != nil {
			return 0, err
		}
		if err := res.Wait(ctx); err != nil {
			return 0, err
		}
		if res.Time().IsZero() {
			return 0, nil
		}
		return time.Since(res.Time()), nil
	})
	if err != nil {
		return nil, err
	}
	r.rtPerGrant = float64(got.steadyTrips) / float64(got.steadyGrants)
	r.granted, r.allowed, r.utilisation, r.overGrants = utilisation(got.grants, c)
	r.jain = jain(got.perWorker)
	slices.Sort(got.late)
	r.lateP50, r.lateP99, r.lateMax = pct(got.late, 0.5), pct(got.late, 0.99), pct(got.late, 1)

	fmt.Fprintf(log, "load: reference: %d goroutines Allow, sleep RetryAfter, retry, for %v...\n", c.workers, c.duration)
	ref, err := contend(ctx, c, trips, func(ctx context.Context) (time.Duration, error) {
		for {
			res, err := lim.TryAcquire(ctx, "allow-loop", limit, 1)
			if err != nil {
				return 0, err
			}
			if res.Allowed {
				return 0, nil
			}
			t := time.NewTimer(res.RetryAfter)
			select {
			case <-ctx.Done():
				t.Stop()
				return 0, ctx.Err()
			case <-t.C:
			}
		}
	})
	if err != nil {
		return nil, err
	}
	r.refRTPerGrant = float64(ref.steadyTrips) / float64(ref.steadyGrants)
	_, _, r.refUtilisation, r.refOverGrants = utilisation(ref.grants, c)
	r.refJain = jain(ref.perWorker)

	fmt.Fprintf(log, "load: TryAcquire vs trivial EVALSHA, %d goroutines, %v each, twice...\n", c.tryers, c.tryFor)
	never := throttle.Limit{Rate: 1e6, Period: time.Second, Burst: 1 << 30}
	trivial := redis.NewScript(`return redis.call("GET", KEYS[1])`)
	evalKey := prefix + "trivial"
	for range 2 { // interleaved, so drift in machine load hits both alike
		n, err := throughput(ctx, c.tryers, c.tryFor, func(ctx context.Context) error {
			_, err := lim.TryAcquire(ctx, "try", never, 1)
			return err
		})
		if err != nil {
			return nil, err
		}
		r.tryPerSec += n / 2
		n, err = throughput(ctx, c.tryers, c.tryFor, func(ctx context.Context) error {
			err := trivial.Run(ctx, rdb, []string{evalKey}).Err()
			if err == redis.Nil {
				return nil
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		r.evalPerSec += n / 2
	}

	fmt.Fprintln(log, "load: memory store TryAcquire...")
	mem := throttle.NewLimiter(throttle.NewMemoryStore())
	br := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = mem.TryAcquire(context.Background(), "k", never, 1)
		}
	})
	r.memNs = float64(br.T.Nanoseconds()) / float64(br.N)
	r.memAllocs = br.AllocsPerOp()

	idle := throttle.NewLimiter(throttle.NewRedisStore(rdb)) // the default prefix, as users run it
	name := fmt.Sprintf("tenant:%06d", rand.IntN(1e6))
	if err := idle.Acquire(ctx, name, throttle.Limit{Rate: 1, Period: time.Minute, Burst: 10}, 1); err != nil {
		return nil, err
	}
	r.idleKey = throttle.DefaultKeyPrefix + "{" + name + "}"
	if r.idleBytes, err = rdb.MemoryUsage(ctx, r.idleKey).Result(); err != nil {
		return nil, err
	}
	if r.idleTTL, err = rdb.PTTL(ctx, r.idleKey).Result(); err != nil {
		return nil, err
	}
	rdb.Del(ctx, r.idleKey)
	return r, nil
}

// contend runs c.workers goroutines calling take in a loop for c.duration and
// records every grant. take returns how late it woke past its slot.
func contend(ctx context.Context, c config, trips *roundTrips, take func(context.Context) (time.Duration, error)) (*contention, error) {
	out := &contention{perWorker: make([]int, c.workers)}
	var mu sync.Mutex
	var stop atomic.Bool
	var firstErr error
	var warm atomic.Bool
	var startedAfterWarm atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if warm.Load() {
					startedAfterWarm.Add(1)
				}
				late, err := take(ctx)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					stop.Store(true)
					return
				}
				at := time.Since(start)
				mu.Lock()
				out.grants = append(out.grants, at)
				out.perWorker[w]++
				if late > 0 {
					out.late = append(out.late, late)
				}
				mu.Unlock()
			}
		}()
	}
	var tripsAtWarm int64
	select {
	case <-time.After(warmUp):
	case <-ctx.Done():
	}
	tripsAtWarm = trips.n.Load()
	warm.Store(true)
	select {
	case <-time.After(c.duration - warmUp):
	case <-ctx.Done():
	}
	stop.Store(true)
	// Workers finish the wait they are in; their grants after the window are
	// kept for round trips and fairness, and left out of utilisation.
	wg.Wait()
	out.steadyTrips = trips.n.Load() - tripsAtWarm
	out.steadyGrants = startedAfterWarm.Load()
	if firstErr != nil {
		return nil, firstErr
	}
	if len(out.grants) == 0 {
		return nil, fmt.Errorf("no grants in %v", c.duration)
	}
	slices.Sort(out.grants)
	return out, nil
}

// utilisation compares grants within the window to Burst + Rate·T and counts
// grants that came before the bound allowed them.
func utilisation(grants []time.Duration, c config) (granted int, allowed, ratio float64, over int) {
	for i, at := range grants {
		if at <= c.duration {
			granted++
		}
		if float64(i+1) > float64(c.burst)+c.rate*at.Seconds()+1e-9 {
			over++
		}
	}
	allowed = float64(c.burst) + c.rate*c.duration.Seconds()
	return granted, allowed, float64(granted) / allowed, over
}

func jain(x []int) float64 {
	var sum, sq float64
	for _, v := range x {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(x)) * sq)
}

func pct[T cmp.Ordered](sorted []T, p float64) T {
	if len(sorted) == 0 {
		var zero T
		return zero
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

func throughput(ctx context.Context, workers int, d time.Duration, call func(context.Context) error) (float64, error) {
	start := time.Now()
	n, err := count(ctx, workers, d, call)
	return float64(n) / time.Since(start).Seconds(), err
}

// count runs call from workers goroutines for d and returns how many calls
// completed, those that ended after d included.
func count(ctx context.Context, workers int, d time.Duration, call func(context.Context) error) (int64, error) {
	var n atomic.Int64
	var stop atomic.Bool
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := call(ctx); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					stop.Store(true)
					return
				}
				n.Add(1)
			}
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return n.Load(), first
}
