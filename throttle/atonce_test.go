package throttle

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// A batch on a token or leaky bucket (lua/reserve_tat.lua) sends the calls
// granted at once as a head that redis.go writes out (atOnce). Every field
// of every decision must be what the same calls made one at a time get,
// from a full bucket, a half-drained one and one booked ahead, with n above
// 1, budgets that end the batch's grants, and an Adaptive bucket (also one
// whose burst an announced rate has scaled below n).
func TestBatchAtOnceIsExact(t *testing.T) {
	_, mini := miniredisClient(t)
	clients := map[string]*redis.Client{"redis": redistest.Shared(t).Client(t), "miniredis": mini}
	sent := &replyLen{}
	for _, rdb := range clients {
		rdb.AddHook(sent)
		for _, s := range []*redis.Script{reserveTBScript, reserveLBScript, reserveATScript} {
			require.NoError(t, s.Load(context.Background(), rdb).Err()) // no NOSCRIPT, so every reply is runInts'
		}
	}

	adaptive := Adaptive{Ceiling: Limit{Rate: 10, Period: time.Second, Burst: 10}}
	policies := []struct {
		p     Policy
		quota float64 // for the Adaptive: a rate announced before each round
	}{
		{p: Limit{Rate: 10, Period: time.Second, Burst: 10}},
		{p: Limit{Rate: 3, Period: time.Millisecond, Burst: 7}},
		{p: LeakyBucket{Rate: 10, Period: time.Second, Capacity: 10}},
		{p: adaptive},
		{p: adaptive, quota: 2}, // its burst scaled to 2: below n = 3
	}
	for name, rdb := range clients {
		for _, pq := range policies {
			p := pq.p
			for _, n := range []int{1, 3} {
				t.Run(fmt.Sprintf("%s/%T/%+v/quota=%g/n=%d", name, p, p, pq.quota, n), func(t *testing.T) {
					clock := newFakeClock()
					store := NewRedisStore(rdb, WithClock(clock))
					lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))
					ctx := context.Background()
					req := func(key string, maxWait int64) request {
						r := request{one: Bucket{Key: key, Limit: p, N: n}, maxWait: maxWait}
						require.NoError(t, lim.check(&r))
						return r
					}
					// Each round's two buckets take the same calls one at a time
					// before the batch: pre of them, then time passes.
					rounds := []struct {
						pre int
						adv time.Duration
						m   int // calls in the batch
					}{{0, 0, 25}, {4, 0, 25}, {10, 250 * time.Millisecond, 25}, {13, 0, 25}, {0, 0, 3}}
					for round, rd := range rounds {
						batchKey, singleKey := fmt.Sprint("batch", round), fmt.Sprint("single", round)
						if pq.quota > 0 {
							for _, key := range []string{batchKey, singleKey} {
								_, err := lim.report(ctx, key, adaptive, answer{quota: pq.quota})
								require.NoError(t, err)
							}
						}
						for i := range rd.pre {
							a, err := store.reserve(ctx, req(batchKey, maxSpan))
							require.NoError(t, err)
							b, err := store.reserve(ctx, req(singleKey, maxSpan))
							require.NoError(t, err)
							require.Equal(t, a, b, "round %d: call %d before the batch", round, i)
						}
						clock.advance(rd.adv)
						// m calls; from the 21st on they may wait no more than 150 ms.
						batch := make([]request, rd.m)
						for i := range batch {
							w := int64(maxSpan)
							if i >= 20 {
								w = 150_000
							}
							batch[i] = req(batchKey, w)
						}
						got, err := store.reserveBatch(ctx, batch)
						require.NoError(t, err)
						require.Len(t, got, len(batch))
						replied := sent.n.Load()
						atOnce := 0 // the leading calls granted with no wait
						for i, r := range batch {
							r.one.Key = singleKey
							want, err := store.reserve(ctx, r)
							require.NoError(t, err)
							assert.Equal(t, want, got[i], "round %d: call %d of the batch", round, i)
							if want.granted && want.wait == 0 && atOnce == i {
								atOnce++
							}
						}
						// The head carries the token bucket's: 7 integers, and a
						// reply of 7 (10 adaptive) for each of the other calls.
						k, per := atOnce, 7
						if _, leaky := p.(LeakyBucket); leaky {
							k = 0
						}
						if pq.p == adaptive {
							per = 10
						}
						assert.Equal(t, int64(7+per*(rd.m-k)), replied, "round %d: %d at once", round, atOnce)
						t.Logf("round %d: %d of %d granted at once", round, atOnce, rd.m)
					}
				})
			}
		}
	}
}

// replyLen is a client hook that keeps the length of the last reply of
// integers (runInts).
type replyLen struct{ n atomic.Int64 }

func (h *replyLen) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *replyLen) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if c, ok := cmd.(*redis.IntSliceCmd); ok {
			h.n.Store(int64(len(c.Val())))
		}
		return err
	}
}

func (h *replyLen) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
