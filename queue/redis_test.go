package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// replyError is a Redis error reply, as go-redis reports one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

func TestTransient(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{io.EOF, true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true},
		{fmt.Errorf("wrapped: %w", io.ErrUnexpectedEOF), true},
		{replyError("CLUSTERDOWN The cluster is down"), true},
		{replyError("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{replyError("MASTERDOWN Link with MASTER is down"), true},
		{replyError("LOADING Redis is loading the dataset in memory"), true},
		{replyError("READONLY You can't write against a read only replica."), true},
		{redis.Nil, false},
		{replyError("NOT FOUND"), false}, // asynq's scripts say so of a task that is gone
		{replyError("ERR Error running script"), false},
		{replyError("NOPERM this user has no permissions"), false},
		{redis.ErrClosed, false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
	}
	for i, tt := range tests {
		assert.Equal(t, tt.want, transient(tt.err), "%d: %v", i, tt.err)
	}
}

// On a cluster whose master of a slot is gone, a call with a deadline is
// tried again until the deadline is near, and succeeds if the master comes
// back meanwhile; a call without one fails at once, and asks for a new slot
// map. (The failover of a master to its replica is in the integration tests.)
func TestFollowFailoverCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	cc := c.Client(t)
	require.Same(t, cc, FollowFailover(cc))
	ctx := context.Background()
	const key = "t:{follow}"
	require.NoError(t, cc.Set(ctx, key, "1", time.Minute).Err())
	m := c.Master(t, key)
	m.Kill(t)

	start := time.Now()
	require.Error(t, cc.Get(ctx, key).Err(), "no master, no deadline")
	assert.Less(t, time.Since(start), 2*time.Second, "failed at once, after go-redis's own retries")

	dctx, cancel := context.WithTimeout(ctx, time.Second)
	start = time.Now()
	err := cc.Get(dctx, key).Err()
	cancel()
	require.Error(t, err, "no master within the deadline")
	elapsed := time.Since(start)
	assert.Greater(t, elapsed, 500*time.Millisecond, "tried again until the deadline was near")
	assert.Less(t, elapsed, 1500*time.Millisecond, "never much past its deadline")

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		done <- cc.Set(ctx, key, "2", time.Minute).Err()
	}()
	time.Sleep(300 * time.Millisecond)
	m.Restart(t) // the same node, empty: it still serves its slots
	select {
	case err := <-done:
		require.NoError(t, err, "the call waited for the master to come back")
	case <-time.After(15 * time.Second):
		t.Fatal("the call did not return")
	}
	got, err := cc.Get(ctx, key).Result()
	require.NoError(t, err)
	assert.Equal(t, "2", got)
}

// A client for one server is left as it is.
func TestFollowFailoverOneServer(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	require.Same(t, rdb, FollowFailover(rdb))
	srv.Kill(t)
	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	require.Error(t, rdb.Ping(dctx).Err())
	assert.Less(t, time.Since(start), 5*time.Second, "not tried again until its deadline")
}
