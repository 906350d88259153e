package redistest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// ping sends PING with a deadline of d.
func ping(c *redis.Client, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Ping(ctx).Err()
}

func TestStart(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)

	assert.True(t, strings.HasPrefix(s.Addr(), "127.0.0.1:"), "addr %s", s.Addr())
	assert.NotEqual(t, "127.0.0.1:6379", s.Addr())
	assert.Equal(t, "redis://"+s.Addr()+"/0", s.URL())

	c := s.Client(t)
	pong, err := c.Ping(context.Background()).Result()
	require.NoError(t, err)
	assert.Equal(t, "PONG", pong)

	opt, err := redis.ParseURL(s.URL())
	require.NoError(t, err)
	assert.Equal(t, s.Addr(), opt.Addr)
}

func TestStartArgs(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, "--requirepass", "secret")

	require.NoError(t, ping(s.Client(t), time.Second), "Client knows the password")

	anon := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = anon.Close() })
	err := ping(anon, time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NOAUTH")
}

func TestShared(t *testing.T) {
	for _, name := range []string{"a", "b", "c"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := redistest.Shared(t)
			assert.Same(t, redistest.Shared(t), s)

			c := s.Client(t)
			ctx := context.Background()
			key := redistest.Prefix(t) + "k"
			require.NoError(t, c.Set(ctx, key, name, time.Minute).Err())
			got, err := c.Get(ctx, key).Result()
			require.NoError(t, err)
			assert.Equal(t, name, got)
		})
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	c := s.Client(t)
	require.NoError(t, ping(c, time.Second))

	s.Pause(t)
	began := time.Now()
	err := ping(c, 200*time.Millisecond)
	elapsed := time.Since(began)
	require.Error(t, err, "PING to a paused server")
	assert.Less(t, elapsed, time.Second, "ctx bounds the call")

	s.Resume(t)
	assert.NoError(t, ping(c, time.Second))
}

func TestKillRestart(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	c := s.Client(t)
	ctx := context.Background()
	addr := s.Addr()

	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	script := redis.NewScript("return 1")
	require.NoError(t, script.Load(ctx, c).Err())

	s.Kill(t)
	assert.Error(t, ping(c, time.Second), "PING to a killed server")

	s.Restart(t)
	assert.Equal(t, addr, s.Addr())
	require.NoError(t, ping(c, time.Second))
	assert.ErrorIs(t, c.Get(ctx, "k").Err(), redis.Nil, "data is gone")
	exists, err := c.ScriptExists(ctx, script.Hash()).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, exists, "script cache is gone")

	s.Restart(t) // while running: kills it first
	assert.NoError(t, ping(c, time.Second))
}

func TestStop(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	c := s.Client(t)
	require.NoError(t, ping(c, time.Second))

	s.Pause(t)
	s.Stop() // ends a paused server too
	s.Stop()
	assert.Error(t, ping(c, time.Second))
}

func TestPrefix(t *testing.T) {
	t.Parallel()
	seen := make(map[string]bool)
	for i := range 10000 {
		p := redistest.Prefix(t)
		require.False(t, seen[p], "call %d: %q repeated", i, p)
		seen[p] = true
	}

	t.Run("odd {name}: with spaces", func(t *testing.T) {
		p := redistest.Prefix(t)
		assert.NotContains(t, p, "{")
		assert.NotContains(t, p, "}")
		assert.NotContains(t, p, " ")
		assert.True(t, strings.HasPrefix(p, "t:TestPrefix/odd__name___with_spaces:"), "prefix %q", p)
		assert.True(t, strings.HasSuffix(p, ":"), "prefix %q", p)
	})
}
