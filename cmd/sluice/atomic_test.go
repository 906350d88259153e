package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// aclUser adds a user to srv with every permission but those in deny
// ("-del", say) and returns a --redis URL that logs in as it.
func aclUser(t *testing.T, srv *redistest.Server, name string, deny ...string) string {
	t.Helper()
	args := []any{"ACL", "SETUSER", name, "on", ">pw-" + name, "~*", "&*", "+@all"}
	for _, d := range deny {
		args = append(args, d)
	}
	require.NoError(t, srv.Client(t).Do(context.Background(), args...).Err())
	return fmt.Sprintf("redis://%s:pw-%s@%s/0", name, name, srv.Addr())
}

// messages counts what the changes channel carries until ctx ends.
func messages(t *testing.T, rdb *redis.Client) func() []string {
	t.Helper()
	sub := control.New(rdb, "sluice:").Subscribe(context.Background())
	t.Cleanup(func() { sub.Close() })
	_, err := sub.Receive(context.Background())
	require.NoError(t, err)
	ch := sub.Channel()
	return func() []string {
		var got []string
		deadline := time.After(300 * time.Millisecond)
		for {
			select {
			case m := <-ch:
				got = append(got, m.Payload)
			case <-deadline:
				return got
			}
		}
	}
}

// sluice set is whole or nothing: a user who may not reset the type's bucket
// (the later step of a set) changes nothing, and is told so; one who may
// not write the runtime limits does not reset the bucket either.
func TestSetIsWholeOrNothing(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx := context.Background()
	r := runArgs("set", "sleep=1/h,burst=5", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	lim := throttle.NewLimiter(throttle.NewRedisStore(admin))
	old := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 5}
	for range 3 {
		res, err := lim.TryAcquire(ctx, "sleep", old, 1)
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	stored := func() string {
		ctl := control.New(admin, "sluice:")
		limits, _, err := ctl.Limits(ctx)
		require.NoError(t, err)
		return limits["sleep"].Spec
	}
	tokens := func() int {
		st, err := lim.Peek(ctx, "sleep", old)
		require.NoError(t, err)
		return st.Remaining
	}

	for i, c := range []struct {
		name string
		deny []string
		args []string
		want string
	}{
		{"no DEL: the bucket reset", []string{"-del"}, []string{"set", "sleep=50/s,burst=50"}, "nothing was changed"},
		{"no HSET: the runtime limits", []string{"-hset"}, []string{"set", "sleep=50/s,burst=50"}, "nothing was changed"},
		{"no PUBLISH: telling the workers", []string{"-publish"}, []string{"set", "sleep=50/s,burst=50"}, "nothing was changed"},
		{"unset, no DEL", []string{"-del"}, []string{"unset", "sleep"}, "nothing was changed"},
		{"unset, no HDEL", []string{"-hdel"}, []string{"unset", "sleep"}, "nothing was changed"},
	} {
		url := aclUser(t, srv, fmt.Sprintf("user%d", i), c.deny...)
		told := messages(t, admin)
		r := runArgs(append(c.args, "--redis", url)...)
		assert.Equal(t, cli.ExitFailure, r.code, c.name)
		assert.Contains(t, r.stderr, c.want, c.name)
		assert.Contains(t, r.stderr, "NOPERM", c.name)
		t.Logf("%s: %s", c.name, r.stderr)
		assert.Empty(t, r.stdout, c.name)
		assert.Equal(t, "sleep=1/h,burst=5", stored(), "%s: the runtime limit is as it was", c.name)
		assert.Equal(t, 2, tokens(), "%s: the bucket is as it was", c.name)
		assert.Empty(t, told(), "%s: the workers were told of no change", c.name)
	}

	// Redis out of memory refuses the reset's first write (the mark that
	// voids the bucket's tickets), so nothing is changed, and it says so.
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "1").Err())
	r = runArgs("set", "sleep=50/s,burst=50", "--redis", srv.URL())
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "0").Err())
	assert.Equal(t, cli.ExitFailure, r.code)
	assert.Contains(t, r.stderr, "sluice: set sleep=50/s,burst=50: nothing was changed: ")
	assert.Contains(t, r.stderr, "OOM")
	assert.Equal(t, "sleep=1/h,burst=5", stored(), "the runtime limit is as it was")
	assert.Equal(t, 2, tokens(), "the bucket is as it was")

	// With every permission, the set is whole: stored, announced, the bucket full.
	told := messages(t, admin)
	r = runArgs("set", "sleep=50/s,burst=50", "--redis", aclUser(t, srv, "ops"))
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Equal(t, "sleep=50/s,burst=50", stored())
	st, err := lim.Peek(ctx, "sleep", throttle.Limit{Rate: 50, Period: time.Second, Burst: 50})
	require.NoError(t, err)
	assert.Equal(t, 50, st.Remaining, "the old limit's bucket was reset")
	assert.Equal(t, []string{"sleep"}, told())
}
