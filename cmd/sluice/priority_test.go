package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
)

// sluice limits and the dashboard count a queue's jobs over its whole
// family (every priority and lane), and by priority.
func TestQueuedByPriority(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctl := control.New(rdb, "sluice:")
	require.NoError(t, ctl.Beat(context.Background(), control.Heartbeat{
		ID: "w1:42:1", Host: "w1", PID: 42, Mode: "shared", Seen: time.Now(), Queues: []string{"default"},
		Limits: []control.LimitState{{Type: "sleep", Spec: "sleep=5/s,burst=2", Source: "flag",
			Waiting: 7, WaitingByPriority: map[string]int64{"1": 2, "5": 5}}},
	}))
	qc := queue.NewClient(asynq.NewClientFromRedisClient(rdb), queue.WithLanes(rdb))
	enq := func(n, prio int, key string) {
		for range n {
			_, err := qc.Enqueue(context.Background(), queue.Task{Type: "sleep", Payload: []byte(`{"ms": 1}`), Priority: prio, Key: key})
			require.NoError(t, err)
		}
	}
	enq(2, 1, "")
	enq(3, 0, "")
	enq(4, 5, "a")
	enq(5, 5, "b") // another lane
	enq(1, 2, "")
	_, err := qc.Enqueue(context.Background(), queue.Task{Type: "sleep", Payload: []byte(`{}`), Priority: 4}, asynq.ProcessIn(time.Hour))
	require.NoError(t, err)

	r := runArgs("--redis", srv.URL(), "limits", "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var views []limitView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
	require.Len(t, views, 1)
	require.NotNil(t, views[0].Queued)
	assert.Equal(t, 16, *views[0].Queued, "every member of the default queue")
	assert.Equal(t, map[string]int{"1": 2, "2": 1, "3": 3, "4": 1, "5": 9}, views[0].QueuedByPriority)
	assert.Equal(t, map[string]int64{"1": 2, "5": 5}, views[0].WaitingByPriority, "the workers' jobs waiting, by priority")

	r = runArgs("--redis", srv.URL(), "limits")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "16 (default; p1 2, p2 1, p3 3, p4 1, p5 9)")
	assert.Contains(t, r.stdout, "7 (p1 2, p5 5)", "WAITING by priority")

	f, err := connect(context.Background(), options{redisURL: srv.URL(), keyPrefix: "sluice:"})
	require.NoError(t, err)
	t.Cleanup(f.close)
	opts, _, err := parseArgs([]string{"dashboard"})
	require.NoError(t, err)
	hs := httptest.NewUnstartedServer(nil)
	opts.addr = hs.Listener.Addr().String()
	hs.Config.Handler = newDashboardFor(f, opts, io.Discard).handler()
	hs.Start()
	t.Cleanup(hs.Close)
	resp, err := http.Get(hs.URL + "/api/state")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st state
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	require.Len(t, st.Queues, 1)
	assert.Equal(t, "default", st.Queues[0].Name)
	assert.Equal(t, 15, st.Queues[0].Pending)
	assert.Equal(t, 1, st.Queues[0].Scheduled)
	assert.Equal(t, map[string]int{"1": 2, "2": 1, "3": 3, "4": 1, "5": 9}, st.Queues[0].ByPriority)
}
