package workers

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// BenchmarkPoolProcess is the pool's own work for one no-op job, asynq's
// left out: its handler called directly, for a task type throttled by a
// limit that never binds on a memory store (no round trip), the same with
// Priorities (a priority Share on its bucket), and for one that is not
// throttled. cmd/load's pool group measures the whole job beside a
// plain asynq server; this shows what the pool adds to each.
func BenchmarkPoolProcess(b *testing.B) {
	pool, err := NewPool(Config{Redis: asynq.RedisClientOpt{Addr: redistest.Shared(b).Addr()},
		Limiter: throttle.NewLimiter(throttle.NewMemoryStore()), Concurrency: 32, Queues: map[string]int{"q": 1}})
	if err != nil {
		b.Fatal(err)
	}
	noop := func(context.Context, *asynq.Task) error { return nil }
	pool.HandleFunc("throttled", noop, &Policy{Name: "never", Limit: throttle.Limit{Rate: 1e6, Period: time.Second, Burst: 1 << 20}})
	pool.HandleFunc("priorities", noop, &Policy{Name: "never-prio", Limit: throttle.Limit{Rate: 1e6, Period: time.Second, Burst: 1 << 20},
		Priorities: true, FairHorizon: time.Hour})
	pool.HandleFunc("free", noop, nil)
	for _, typ := range []string{"throttled", "priorities", "free"} {
		b.Run(typ, func(b *testing.B) {
			task := asynq.NewTask(typ, []byte("x"))
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			b.ReportAllocs()
			for b.Loop() {
				if err := pool.process(ctx, task); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
