package throttle

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// BenchmarkPriority is the cost of priorities on a plain bucket (no tenants,
// as the worker pool engages them for a type's limit): one bucket booked by
// 32 goroutines, without a Share (plain: the lean script, coalesced), with
// a Share of one level (share: the general script with share.lua, one call
// each) and with a Share of levels 1 to 5 (priority), on a memory store and
// on Redis. Run with
//
//	go test -run '^$' -bench 'Priority' -benchtime 3s ./throttle/
func BenchmarkPriority(b *testing.B) {
	for _, store := range []string{"memory", "redis"} {
		for _, kind := range []string{"plain", "share", "priority"} {
			b.Run(store+"/"+kind, func(b *testing.B) {
				st := Store(NewMemoryStore())
				var rdb *redis.Client
				if store == "redis" {
					rdb = redistest.Shared(b).Client(b)
					st = NewRedisStore(rdb)
					rdb.ConfigResetStat(context.Background())
				}
				lim := NewLimiter(st, WithKeyPrefix(redistest.Prefix(b)))
				ctx := context.Background()
				var next atomic.Int64
				b.SetParallelism(32 / max(1, runtime.GOMAXPROCS(0)))
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						bk := Bucket{Key: "send", Limit: unlimited}
						switch kind {
						case "share": // one level: a fair share's cost before priorities
							bk.Share = &Share{Tenant: "send", Horizon: time.Hour}
						case "priority":
							bk.Share = &Share{Tenant: "send", Priority: 1 + int(next.Add(1)%5), Horizon: time.Hour}
						}
						if _, err := lim.ReserveAll(ctx, []Bucket{bk}, time.Hour); err != nil {
							b.Error(err)
							return
						}
					}
				})
				if rdb != nil {
					b.StopTimer()
					// The server's own time per script call (a coalesced
					// call serves many grants).
					info := rdb.Info(ctx, "commandstats").Val()
					if i := strings.Index(info, "cmdstat_evalsha:"); i >= 0 {
						var calls, usec int64
						var per float64
						fmt.Sscanf(info[i:], "cmdstat_evalsha:calls=%d,usec=%d,usec_per_call=%g", &calls, &usec, &per)
						b.ReportMetric(per, "redis-µs/script")
						b.ReportMetric(float64(calls)/float64(b.N), "scripts/grant")
					}
				}
			})
		}
	}
}
