package main

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/control"
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

// A worker started with two named limits for a type takes a runtime change
// of both (sluice set with two specs) and reports them in its heartbeat, one
// spec per limit; unset, its own apply again.
func TestRuntimeNamedLimits(t *testing.T) {
	queues := redistest.Start(t)
	limiter := redistest.Shared(t)
	prefix := redistest.Prefix(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{
			"--redis", queues.URL(), "--limiter-redis", limiter.URL(), "--key-prefix", prefix,
			"--limit", "sleep=100/s,name=requests", "--limit", "sleep=1000/m,name=tokens,cost={payload.ms}",
			"--status-interval", "0",
		}, io.Discard, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	ctl := control.New(limiter.Client(t), prefix)
	specsOf := func() []string {
		hbs, err := ctl.Workers(context.Background())
		if err != nil || len(hbs) != 1 || len(hbs[0].Limits) != 1 {
			return nil
		}
		return hbs[0].Limits[0].Specs
	}
	own := []string{"sleep=100/s,burst=100,name=requests", "sleep=1000/m,burst=17,name=tokens,cost={payload.ms}"}
	require.Eventually(t, func() bool { return slices.Equal(specsOf(), own) }, 10*time.Second, 10*time.Millisecond, "%s", &stderr)

	_, err := ctl.Set(context.Background(), []string{"sleep=5/s,name=requests", "sleep=60/m,name=tokens,burst=10,cost={payload.ms}"}, "test@here")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return strings.Contains(stderr.String(), `msg="limit changed at runtime" type=sleep`)
	}, 5*time.Second, 5*time.Millisecond, "%s", &stderr)
	// The heartbeat says so at its next beat.
	changed := []string{"sleep=5/s,burst=5,name=requests", "sleep=60/m,burst=10,name=tokens,cost={payload.ms}"}
	require.Eventually(t, func() bool { return slices.Equal(specsOf(), changed) }, 3*heartbeatEvery, 50*time.Millisecond, "%s", &stderr)

	had, err := ctl.Unset(context.Background(), "sleep")
	require.NoError(t, err)
	require.True(t, had)
	require.Eventually(t, func() bool { return slices.Equal(specsOf(), own) }, 3*heartbeatEvery, 50*time.Millisecond, "%s", &stderr)
}
