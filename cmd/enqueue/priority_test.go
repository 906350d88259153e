package main

import (
	"context"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
)

// --priority puts the tasks in their priority's member of the queue, with
// the sluice-priority header; --key gives them a lane of their own.
func TestEnqueuePriority(t *testing.T) {
	srv := redistest.Start(t)
	insp := asynq.NewInspectorFromRedisClient(srv.Client(t))
	r := runArgs(context.Background(), "--redis", srv.URL(), "--type", "sleep", "--payload", `{"ms": 1}`, "--count", "3", "--priority", "1", "--queue", "s")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	tasks, err := insp.ListPendingTasks("s:p1")
	require.NoError(t, err)
	require.Len(t, tasks, 3)
	assert.Equal(t, "1", tasks[0].Headers[queue.HeaderPriority])

	// Tenant a fills a lane; tenant b, new, gets another.
	r = runArgs(context.Background(), "--redis", srv.URL(), "--type", "sleep", "--payload", `{"ms": 1}`, "--count", "5", "--key", "a", "--queue", "t")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	r = runArgs(context.Background(), "--redis", srv.URL(), "--type", "sleep", "--payload", `{"ms": 1}`, "--key", "b", "--priority", "5", "--queue", "t")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	where := map[string]string{} // key → member
	for _, q := range queue.Family("t") {
		ts, err := insp.ListPendingTasks(q)
		if err != nil {
			continue
		}
		for _, ti := range ts {
			where[ti.Headers[queue.HeaderKey]] = q
		}
	}
	_, pa, la, _ := queue.ParseMember(where["a"])
	_, pb, lb, _ := queue.ParseMember(where["b"])
	assert.Equal(t, 3, pa)
	assert.Equal(t, 5, pb)
	assert.NotEqual(t, la, lb, "b's lane is not a's: %v", where)
}

// --envelopes reads each line as {"payload", "key", "cost", "priority"}, the
// fields left out taking the flags' values; a bad envelope names its line
// and nothing is sent.
func TestEnqueueEnvelopes(t *testing.T) {
	srv := redistest.Start(t)
	insp := asynq.NewInspectorFromRedisClient(srv.Client(t))
	lines := `{"payload": {"ms": 1}, "priority": 1, "key": "x"}
{"payload": {"ms": 2}, "cost": 4}

{"payload": {"ms": 3}, "priority": 5}
`
	r := runIn(context.Background(), lines, "--redis", srv.URL(), "--type", "sleep", "--payloads", "-", "--envelopes", "--priority", "2", "--key", "k", "--queue", "e")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "enqueued 3 tasks of type sleep (3 payloads) to queue e")
	type want struct{ payload, key, cost, prio string }
	var got []want
	for _, q := range queue.Family("e") {
		ts, err := insp.ListPendingTasks(q)
		if err != nil {
			continue
		}
		for _, ti := range ts {
			got = append(got, want{string(ti.Payload), ti.Headers[queue.HeaderKey], ti.Headers[queue.HeaderCost], ti.Headers[queue.HeaderPriority]})
		}
	}
	assert.ElementsMatch(t, []want{
		{`{"ms": 1}`, "x", "", "1"},
		{`{"ms": 2}`, "k", "4", "2"},
		{`{"ms": 3}`, "k", "", "5"},
	}, got)

	for i, c := range []struct{ line, want string }{
		{`{"payload": {"ms": 1}, "priority": 9}`, "line 1: envelope: priority 9 is out of range: 1 (first) to 5 (last)"},
		{`{"payload": {"ms": 1}, "prio": 1}`, `line 1: envelope: unknown field "prio" (want {"payload": JSON, "key": "K", "cost": N, "priority": N})`},
		{`{"ms": 1}`, `line 1: envelope: unknown field "ms" (want {"payload": JSON, "key": "K", "cost": N, "priority": N})`},
		{`{"key": "a"}`, `line 1: envelope: "payload" is missing`},
		{`{"payload": {"ms": 1}, "cost": -1}`, "line 1: envelope: cost -1 must not be negative"},
		{`{"payload": {"ms": "x"}}`, `line 1: payload is not a valid sleep: "ms" is "x", not a number`},
	} {
		r := runIn(context.Background(), c.line, "--redis", srv.URL(), "--type", "sleep", "--payloads", "-", "--envelopes", "--queue", "bad")
		assert.Equal(t, cli.ExitUsage, r.code, "%d", i)
		assert.Equal(t, "enqueue: --payloads stdin "+c.want, strings.Split(r.stderr, "\n")[0], "%d", i)
	}
	qs, err := insp.Queues()
	require.NoError(t, err)
	assert.NotContains(t, qs, "bad", "nothing sent")
}
