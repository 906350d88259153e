package throttle

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// Many goroutines block in Acquire on one bucket for a while; at every grant,
// the number granted so far must not exceed Burst + Rate·elapsed, and every
// goroutine must be served.
func testNoOvergrant(t *testing.T, lim *Limiter, key string) {
	const workers = 32
	l := Limit{Rate: 100, Burst: 5}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()

	var mu sync.Mutex
	var grants []time.Time
	perWorker := make([]int, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if err := lim.Acquire(ctx, key, l, 1); err != nil {
					return
				}
				now := time.Now()
				mu.Lock()
				grants = append(grants, now)
				perWorker[w]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	sort.Slice(grants, func(i, j int) bool { return grants[i].Before(grants[j]) })
	require.NotEmpty(t, grants)
	for i, g := range grants {
		allowed := float64(l.Burst) + l.Rate*g.Sub(start).Seconds()
		if float64(i+1) > allowed {
			t.Fatalf("grant %d at %v: %d granted, at most %.2f allowed", i, g.Sub(start), i+1, allowed)
		}
	}
	for w, n := range perWorker {
		assert.Positive(t, n, fmt.Sprintf("worker %d was never served", w))
	}
}

func TestNoOvergrantMemory(t *testing.T) {
	testNoOvergrant(t, NewLimiter(NewMemoryStore()), "k")
}

func TestNoOvergrantRedis(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	testNoOvergrant(t, NewLimiter(NewRedisStore(rdb), WithKeyPrefix(redistest.Prefix(t))), "k")
}
