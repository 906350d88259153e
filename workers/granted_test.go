package workers_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// Two pools (two hosts) share one bucket; some jobs wait for their turn in a
// worker, most go back holding it and come back. The instants Granted gives
// their handlers hold at most Burst + Rate·t jobs in any span t, to the
// microsecond: one clock for every turn (a ticket's record keeps its slot on
// it), whichever host booked it and however late its handler started.
func TestGrantedInstantsHoldTheLimit(t *testing.T) {
	const jobs = 30
	h := newHarness(t)
	limit := throttle.Limit{Rate: 20, Period: time.Second, Burst: 3}
	var mu sync.Mutex
	var turns []time.Time
	done := make(chan struct{}, jobs)
	for range 2 {
		cfg := h.config(t)
		cfg.MaxWait = 100 * time.Millisecond
		p, err := workers.NewPool(cfg)
		require.NoError(t, err)
		p.HandleFunc("job", func(ctx context.Context, _ *asynq.Task) error {
			at, ok := workers.Granted(ctx)
			if !assert.True(t, ok, "a throttled job has a granted instant") {
				return nil
			}
			assert.False(t, time.Now().Before(at.Add(-time.Millisecond)), "the handler starts at or after its turn")
			mu.Lock()
			turns = append(turns, at)
			mu.Unlock()
			done <- struct{}{}
			return nil
		}, &workers.Policy{Name: "shared", Limit: limit})
		start(t, p)
	}
	for range jobs {
		h.enqueue(t, queue.Task{Type: "job"}, asynq.MaxRetry(0))
	}
	for i := range jobs {
		recv(t, done, 20*time.Second, "job "+string(rune('0'+i%10)))
	}
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(turns, time.Time.Compare)
	for i := range turns {
		for j := i; j < len(turns); j++ {
			d := turns[j].Sub(turns[i]) + time.Microsecond
			require.LessOrEqualf(t, float64(j-i+1), float64(limit.Burst)+limit.Rate*d.Seconds(),
				"turns %d to %d: %d jobs granted in %v", i, j, j-i+1, d)
		}
	}
	_, ok := workers.Granted(context.Background())
	assert.False(t, ok, "outside a handler")
}
