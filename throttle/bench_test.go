package throttle

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/internal/redistest"
)

// A limit that the benchmarks never reach.
var unlimited = Limit{Rate: 1e6, Period: time.Second, Burst: maxBurst}

// BenchmarkMemoryTryAcquire is the in-process fast path: one key, uncontended.
// Target (issue #14): ≤ 100 ns/op and 0 allocs/op, beside BenchmarkPeerXRate*.
func BenchmarkMemoryTryAcquire(b *testing.B) {
	lim := NewLimiter(NewMemoryStore())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := lim.TryAcquire(ctx, "k", unlimited, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRedisTryAcquire and BenchmarkRedisEvalshaTrivial run 32 goroutines
// (SetParallelism scales GOMAXPROCS) through one client against one key:
// TryAcquire should reach ≥ 0.95 × the throughput of a trivial one-key script.
func BenchmarkRedisTryAcquire(b *testing.B) {
	rdb := redistest.Shared(b).Client(b)
	lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(redistest.Prefix(b)))
	ctx := context.Background()
	b.SetParallelism(32 / max(1, runtime.GOMAXPROCS(0))) // 32 goroutines
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := lim.TryAcquire(ctx, "k", unlimited, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// trivialScript is the reference: one key, one command, nothing else.
var trivialScript = redis.NewScript(`return redis.call("GET", KEYS[1])`)

func BenchmarkRedisEvalshaTrivial(b *testing.B) {
	rdb := redistest.Shared(b).Client(b)
	key := redistest.Prefix(b) + "trivial"
	ctx := context.Background()
	b.SetParallelism(32 / max(1, runtime.GOMAXPROCS(0))) // 32 goroutines
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := trivialScript.Run(ctx, rdb, []string{key}).Err(); err != nil && err != redis.Nil {
				b.Error(err)
				return
			}
		}
	})
}

// policiesForBench are the policies under their benchmarks, each with room
// for many grants in a row (a SlidingLog's work grows with Max, so Max is
// modest and each grant may be a denial once the log is full: both are work
// the script does).
var policiesForBench = []struct {
	name string
	pol  Policy
}{
	{"Limit", unlimited},
	{"FixedWindow", FixedWindow{Max: 1 << 30, Window: time.Hour}},
	{"SlidingLog", SlidingLog{Max: 100, Window: time.Hour}},
	{"SlidingWindow", SlidingWindow{Max: 1 << 20, Window: time.Hour, Slots: 10}},
	{"LeakyBucket", LeakyBucket{Rate: 1e6, Capacity: maxBurst}},
}

// BenchmarkPolicyTryAcquire is one uncontended TryAcquire per policy, in
// memory and on Redis (one goroutine: the round trip, not the server's limit).
func BenchmarkPolicyTryAcquire(b *testing.B) {
	ctx := context.Background()
	rdb := redistest.Shared(b).Client(b)
	for _, st := range []struct {
		name  string
		store func() Store
	}{
		{"memory", func() Store { return NewMemoryStore() }},
		{"redis", func() Store { return NewRedisStore(rdb) }},
	} {
		for _, p := range policiesForBench {
			b.Run(st.name+"/"+p.name, func(b *testing.B) {
				lim := NewLimiter(st.store(), WithKeyPrefix(redistest.Prefix(b)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := lim.TryAcquire(ctx, "k", p.pol, 1); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkRedisAcquireHot is 64 goroutines in Acquire on one bucket of
// 400 k/s burst 4000 through one Limiter: the calls coalesce (coalesce.go).
func BenchmarkRedisAcquireHot(b *testing.B) {
	rdb := redistest.Shared(b).Client(b)
	lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(redistest.Prefix(b)))
	hot := Limit{Rate: 400_000, Period: time.Second, Burst: 4000}
	ctx := context.Background()
	b.SetParallelism(64 / max(1, runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := lim.Acquire(ctx, "hot", hot, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// The peers of BenchmarkMemoryTryAcquire, in the same run: golang.org/x/time/rate
// alone (one limiter, no key), and a mutex-guarded map of them by key, the
// in-process keyed limiter a program would write itself.
func BenchmarkPeerXRateAllow(b *testing.B) {
	lim := rate.NewLimiter(rate.Limit(1e6), maxBurst)
	b.ReportAllocs()
	for b.Loop() {
		lim.Allow()
	}
}

func BenchmarkPeerXRateMap(b *testing.B) {
	var mu sync.Mutex
	lims := map[string]*rate.Limiter{}
	allow := func(key string) bool {
		mu.Lock()
		l := lims[key]
		if l == nil {
			l = rate.NewLimiter(rate.Limit(1e6), maxBurst)
			lims[key] = l
		}
		mu.Unlock()
		return l.Allow()
	}
	b.ReportAllocs()
	for b.Loop() {
		allow("k")
	}
}

// BenchmarkMemoryTryAcquireKeys is TryAcquire from every goroutine on keys
// of its own (RunParallel: GOMAXPROCS goroutines): the store's shards keep
// them from waiting on one lock. BenchmarkPeerXRateMapKeys is the peer.
func BenchmarkMemoryTryAcquireKeys(b *testing.B) {
	lim := NewLimiter(NewMemoryStore())
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := "k" + strconv.FormatInt(next.Add(1), 10)
		for pb.Next() {
			if _, err := lim.TryAcquire(ctx, key, unlimited, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkPeerXRateMapKeys(b *testing.B) {
	var mu sync.Mutex
	lims := map[string]*rate.Limiter{}
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := "k" + strconv.FormatInt(next.Add(1), 10)
		for pb.Next() {
			mu.Lock()
			l := lims[key]
			if l == nil {
				l = rate.NewLimiter(rate.Limit(1e6), maxBurst)
				lims[key] = l
			}
			mu.Unlock()
			l.Allow()
		}
	})
}
