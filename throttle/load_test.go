package throttle

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// policyLoad is what runPolicyLoad saw: every grant's slot on the store's
// clock (µs), the load's span on that clock, and the commands sent.
type policyLoad struct {
	slots      []int64 // sorted server-time slots of every grant, µs
	start, end int64   // the store's time at the first call and at the end, µs
	perWorker  []int
	// Redis commands sent and reservations granted, from a quarter to three
	// quarters of the run: the steady state, without the start and the
	// calls cut off at the end.
	commands, reserved int64
}

// roundTripsPerGrant is commands sent per grant in the steady state.
func (p policyLoad) roundTripsPerGrant() float64 {
	return float64(p.commands) / float64(p.reserved)
}

// runPolicyLoad has 32 goroutines block in Acquire, one token at a time, on
// one key under pol against a real redis-server for d. Each grant is recorded
// at its slot on the server's clock (the reservation's now + wait), so checks
// of a policy's invariant are exact rather than blurred by wake-up lateness.
// Acquire is Reserve + Wait; the load calls those two, which is the same work.
func runPolicyLoad(t *testing.T, pol Policy, d time.Duration) policyLoad {
	t.Helper()
	const workers = 32
	var commands atomic.Int64
	rdb := redistest.Shared(t).Client(t)
	rdb.AddHook(countHook{&commands})
	store := NewRedisStore(rdb)
	t.Cleanup(func() { store.Close() })
	lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))

	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var reserved atomic.Int64
	var mu sync.Mutex
	load := policyLoad{perWorker: make([]int, workers), start: -1}
	steady := make(chan [2]int64, 1)
	go func() {
		time.Sleep(d / 4)
		c0, r0 := commands.Load(), reserved.Load()
		time.Sleep(d / 2)
		steady <- [2]int64{commands.Load() - c0, reserved.Load() - r0}
	}()
	var firstErr error
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				dl, _ := ctx.Deadline()
				r, err := lim.Reserve(ctx, "load", pol, 1, time.Until(dl))
				if err != nil {
					var le *LimitedError
					if !errors.As(err, &le) && ctx.Err() == nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					if errors.As(err, &le) && ctx.Err() == nil {
						// A full LeakyBucket queue: come back when it says.
						select {
						case <-time.After(le.RetryAfter):
						case <-ctx.Done():
						}
					}
					continue
				}
				reserved.Add(1)
				if err := r.Wait(ctx); err != nil {
					return // cancelled: refunded, not a grant
				}
				mu.Lock()
				load.slots = append(load.slots, r.d.slot())
				if load.start < 0 || r.d.now < load.start {
					load.start = r.d.now
				}
				load.perWorker[w]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.NoError(t, firstErr)
	require.NotEmpty(t, load.slots)
	sort.Slice(load.slots, func(i, j int) bool { return load.slots[i] < load.slots[j] })
	st := <-steady
	load.commands, load.reserved = st[0], st[1]
	load.end = redisNow(t, rdb)
	return load
}

// redisNow is the server's TIME in µs.
func redisNow(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	require.NoError(t, err)
	return now.UnixMicro()
}

// maxInSpan is the most slots in any half-open span (x-span, x] — the most
// grants any window of length span saw.
func maxInSpan(slots []int64, span int64) int {
	best, lo := 0, 0
	for hi, s := range slots {
		for slots[lo] <= s-span {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// The token bucket under the same load as the other policies: never more than
// Burst + Rate·elapsed, at least 95 % of that used, about one round trip per grant.
func TestPolicyLoadTokenBucket(t *testing.T) {
	l := Limit{Rate: 200, Burst: 10}
	load := runPolicyLoad(t, l, 2*time.Second)
	T := wholeT(t, l)
	for i, s := range load.slots {
		allowed := int64(l.Burst) + (s-load.start)/T
		require.LessOrEqual(t, int64(i+1), allowed, "grant %d at +%d µs", i, s-load.start)
	}
	allowed := float64(l.Burst) + float64(load.slots[len(load.slots)-1]-load.start)/float64(T)
	used := float64(len(load.slots)) / allowed
	t.Logf("token bucket %v: %d grants, %.2f%% of what it allows, %.3f round trips per grant", l, len(load.slots), 100*used, load.roundTripsPerGrant())
	require.GreaterOrEqual(t, used, 0.95)
	require.Less(t, load.roundTripsPerGrant(), 1.2)
}
