package workers_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// Two pools on one queue Redis, as two hosts: each learns from asynq's
// heartbeats that the fleet has two processes, and that one remains once the
// other has shut down. A FailLocal Limiter given the count takes its share.
func TestHostsCountsTheFleet(t *testing.T) {
	h := newHarness(t)
	var pools []*workers.Pool
	var counts []*workers.Hosts
	for range 2 {
		cfg := h.config(t)
		hosts, err := workers.HostsFor(cfg)
		require.NoError(t, err)
		cfg.Hosts = hosts
		t.Cleanup(func() { cfg.Hosts.Close() })
		p, err := workers.NewPool(cfg)
		require.NoError(t, err)
		p.HandleFunc("noop", func(context.Context, *asynq.Task) error { return nil }, nil)
		start(t, p)
		pools = append(pools, p)
		counts = append(counts, cfg.Hosts)
	}
	waitFor(t, 15*time.Second, "both pools to count two hosts", func() bool {
		return counts[0].Hosts() == 2 && counts[1].Hosts() == 2
	})

	// Given to a Limiter under FailLocal, the count is what it divides by.
	lim := throttle.NewLimiter(throttle.NewMemoryStore(), throttle.WithFailurePolicy(throttle.FailLocal), throttle.WithHosts(counts[0].Hosts))
	require.NoError(t, lim.Err())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, pools[1].Shutdown(ctx))
	waitFor(t, 15*time.Second, "the remaining pool to count one host", func() bool { return counts[0].Hosts() == 1 })
	assert.Equal(t, 1, counts[0].Hosts())
}

// NewHosts returns an error, not a panic, for what NewPool refuses.
func TestNewHostsRefusesBadRedis(t *testing.T) {
	_, err := workers.NewHosts(nil)
	require.Error(t, err)
	_, err = workers.NewHosts(badConnOpt{})
	assert.ErrorContains(t, err, "unsupported asynq.RedisConnOpt")
}

// badConnOpt makes no redis.UniversalClient.
type badConnOpt struct{}

func (badConnOpt) MakeRedisClient() any { return 42 }
