package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// A runtime limit written without its pub/sub message (lost, or sent while
// the worker reconnected) is applied within a second all the same: the
// worker reads the runtime limits that often (sluice set's "every worker
// applies it within a second").
func TestRuntimeLimitWithoutItsMessage(t *testing.T) {
	queues := redistest.Start(t)
	limiter := redistest.Shared(t)
	prefix := redistest.Prefix(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{
			"--redis", queues.URL(), "--limiter-redis", limiter.URL(), "--key-prefix", prefix,
			"--limit", "sleep=100/s", "--status-interval", "0",
		}, io.Discard, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "worker started") }, 10*time.Second, 10*time.Millisecond, "%s", &stderr)
	time.Sleep(100 * time.Millisecond) // the first read of the runtime limits is done

	for i, spec := range []string{"sleep=3/s", "sleep=4/s", "sleep=5/s"} {
		written := time.Now()
		require.NoError(t, limiter.Client(t).HSet(context.Background(), prefix+"{ctl}:limits", "sleep",
			`{"spec": "`+spec+`", "by": "test@here", "at": "2026-11-25T00:00:00Z"}`).Err())
		require.Eventually(t, func() bool {
			return strings.Contains(stderr.String(), `msg="limit changed at runtime" type=sleep spec="`+spec+`" `)
		}, 10*time.Second, 5*time.Millisecond, "%s", &stderr)
		took := time.Since(written)
		t.Logf("step %d: applied %v after it was written, without a message", i, took.Round(time.Millisecond))
		assert.Less(t, took, time.Second, "step %d", i)
		time.Sleep(time.Duration(i) * 300 * time.Millisecond) // another phase of the poll
	}
	time.Sleep(3 * runtimePoll)
	assert.Equal(t, 1, strings.Count(stderr.String(), `msg="limit changed at runtime" type=sleep spec="sleep=5/s" `),
		"applied once, not at every read (the entry is not written as String writes it)")
}
