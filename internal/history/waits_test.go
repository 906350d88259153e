package history

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWaitsMaxMerge(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		r := NewRing(rdb, prefix, 30*time.Second)
		at := t0.Add(10 * time.Second)
		require.NoError(t, r.AddWaits(ctx, "t", at, map[string]time.Duration{"acme": 42 * time.Second, "beta": time.Second}))
		require.NoError(t, r.AddWaits(ctx, "t", at.Add(time.Second), map[string]time.Duration{"acme": 5 * time.Second, "beta": 3 * time.Second}))
		// next minute, a shorter wait for acme and a new tenant.
		require.NoError(t, r.AddWaits(ctx, "t", at.Add(time.Minute), map[string]time.Duration{"acme": 2 * time.Second, "gamma": 1500 * time.Millisecond}))

		got, err := ReadWaits(ctx, rdb, prefix, "t", at.Add(time.Minute), 5*time.Minute)
		require.NoError(t, err)
		assert.Equal(t, map[string]time.Duration{"acme": 42 * time.Second, "beta": 3 * time.Second, "gamma": 1500 * time.Millisecond}, got)

		// Only the last minute: acme's 42 s was the minute before.
		got, err = ReadWaits(ctx, rdb, prefix, "t", at.Add(time.Minute), 0)
		require.NoError(t, err)
		assert.Equal(t, map[string]time.Duration{"acme": 2 * time.Second, "gamma": 1500 * time.Millisecond}, got)

		ttl, err := rdb.PTTL(ctx, WaitsKey(prefix, "t", at)).Result()
		require.NoError(t, err)
		assert.InDelta(t, WaitsTTL.Seconds(), ttl.Seconds(), 1)

		got, err = ReadWaits(ctx, rdb, prefix, "none", at, time.Hour)
		require.NoError(t, err)
		assert.Empty(t, got)
	})
}

func TestWaitsBound(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		r := NewRing(rdb, prefix, 30*time.Second)
		first := make(map[string]time.Duration)
		for i := range MaxTenants {
			first[fmt.Sprintf("t%04d", i)] = time.Duration(i+1) * time.Millisecond
		}
		require.NoError(t, r.AddWaits(ctx, "t", t0, first))
		// 10 more, longer than all but the longest 5 of the first.
		more := make(map[string]time.Duration)
		for i := range 10 {
			more[fmt.Sprintf("n%d", i)] = time.Duration(MaxTenants-5) * time.Millisecond
		}
		require.NoError(t, r.AddWaits(ctx, "t", t0, more))

		n, err := rdb.ZCard(ctx, WaitsKey(prefix, "t", t0)).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(MaxTenants), n)
		got, err := ReadWaits(ctx, rdb, prefix, "t", t0, time.Minute)
		require.NoError(t, err)
		assert.Len(t, got, MaxTenants)
		for i := range 10 {
			assert.Contains(t, got, fmt.Sprintf("n%d", i))
			_, kept := got[fmt.Sprintf("t%04d", i)]
			assert.False(t, kept, "the shortest wait t%04d is dropped", i)
		}
		assert.Equal(t, time.Duration(MaxTenants)*time.Millisecond, got[fmt.Sprintf("t%04d", MaxTenants-1)])
	})
}
