package throttle

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// BenchmarkShareTenants books one turn for each of many tenants on one
// shared bucket in Redis (32 goroutines) and reports what the tenants'
// state costs: Redis memory per tenant while their tags are ahead
// (MEMORY USAGE of the two keys), and the µs per fair reserve. After the
// tags pass, the keys expire as a whole. Run with
//
//	go test -run '^$' -bench ShareTenants -benchtime 100000x ./throttle/
//
// to have 100 k tenants at once.
func BenchmarkShareTenants(b *testing.B) {
	rdb := redistest.Shared(b).Client(b)
	prefix := redistest.Prefix(b)
	lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(prefix))
	ctx := context.Background()
	// 1000 turns a second, each booked ahead: with n tenants each tag moves
	// n ms, so every tenant stays in the set for the whole run.
	global := Limit{Rate: 1000, Burst: 1000}
	var next atomic.Int64
	b.SetParallelism(32 / max(1, runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tenant := fmt.Sprint("t", next.Add(1))
			_, err := lim.ReserveAll(ctx, []Bucket{
				{Key: "{acct}:global", Limit: global, Share: &Share{Tenant: tenant, Horizon: time.Hour}},
			}, 24*time.Hour)
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	tags, info := shareKeys(prefix, "{acct}:global")
	n := rdb.ZCard(ctx, tags).Val()
	bytes := rdb.MemoryUsage(ctx, tags, 0).Val() + rdb.MemoryUsage(ctx, info, 0).Val()
	if n > 0 {
		b.ReportMetric(float64(n), "tenants")
		b.ReportMetric(float64(bytes)/float64(n), "redis-bytes/tenant")
	}
	rdb.Del(ctx, tags, info, redisKey(prefix, "{acct}:global"))
}
