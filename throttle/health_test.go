package throttle

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/redistest"
)

// Under FailClosed and FailOpen a store outage is one mode change down and one
// back, however many calls fail in between, and Mode says it meanwhile.
func TestModeFollowsTheStoreUnderClosedAndOpen(t *testing.T) {
	for _, c := range []struct {
		policy FailurePolicy
		down   string
	}{{FailClosed, ModeClosed}, {FailOpen, ModeOpen}} {
		t.Run(c.down, func(t *testing.T) {
			srv := redistest.Start(t)
			proxy := faultproxy.Start(t, srv.Addr())
			rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
			t.Cleanup(func() { rdb.Close(); proxy.Close() })
			var (
				mu      sync.Mutex
				changes []string
			)
			lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(redistest.Prefix(t)), WithFailurePolicy(c.policy),
				WithModeChange(func(mode string, err error) {
					mu.Lock()
					defer mu.Unlock()
					changes = append(changes, mode)
					if mode == ModeShared {
						assert.NoError(t, err)
					} else {
						assert.Error(t, err)
					}
				}))
			l := Limit{Rate: 1000, Burst: 1000}
			try := func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				_, err := lim.TryAcquire(ctx, "k", l, 1)
				return err
			}
			require.NoError(t, try())
			assert.Equal(t, ModeShared, lim.Mode())

			proxy.BlackHole(true) // the store stops answering
			for range 4 {
				err := try()
				if c.policy == FailClosed {
					assert.ErrorIs(t, err, ErrUnavailable)
				} else {
					assert.NoError(t, err, "FailOpen grants")
				}
			}
			assert.Equal(t, c.down, lim.Mode())

			proxy.BlackHole(false)
			require.Eventually(t, func() bool { return try() == nil && lim.Mode() == ModeShared }, 5*time.Second, 20*time.Millisecond)
			require.NoError(t, try())
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []string{c.down, ModeShared}, changes, "one line down, one back")
		})
	}
}
