package throttle

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
)

// A limit that the benchmarks never reach.
var unlimited = Limit{Rate: 1e6, Period: time.Second, Burst: maxBurst}

// BenchmarkMemoryTryAcquire is the in-process fast path: one key, uncontended.
// Target: ≤ 150 ns/op and 0 allocs/op.
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
