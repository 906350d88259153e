package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/httpjob"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
)

// Two --limit flags for one type are its named limits, which every job takes
// together: a requests bucket and a tokens bucket whose cost each job's
// request body says (max_tokens), as for an LLM API. With jobs of 30
// tokens, the tokens bucket binds (20 jobs a second, where the requests
// bucket would let 50 through): the jobs reach the upstream no faster than
// it allows, taking about its ideal time; a job whose cost is over the
// tokens bucket's burst, or missing, is archived with the reason, never run.
func TestNamedLimitsBindTogether(t *testing.T) {
	const (
		jobs      = 30
		maxTokens = 30
		tokenRate = 600.0 // per second
		tokBurst  = 60
	)
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{})
	fleet := startFleet(t, srv, insp, 1, "--concurrency", "10",
		"--limit", "http:request=50/s,burst=5,name=requests,adapt=off",
		"--limit", fmt.Sprintf("http:request=%g/s,burst=%d,name=tokens,cost={body.max_tokens}", tokenRate, tokBurst))

	qc := queue.NewClient(asynq.NewClientFromRedisClient(srv.Client(t)))
	send := func(id, body string) {
		p, err := json.Marshal(httpjob.Request{URL: up.URL(id, ""), Method: http.MethodPost, Body: body})
		require.NoError(t, err)
		_, err = qc.Enqueue(context.Background(), queue.Task{Type: "http:request", Payload: p}, asynq.TaskID(id), asynq.MaxRetry(3))
		require.NoError(t, err)
	}
	send("too-big", `{"max_tokens": 100}`)
	send("no-body", "")
	for _, id := range jobIDs("job", jobs) {
		send(id, fmt.Sprintf(`{"model": "m", "max_tokens": %d}`, maxTokens))
	}
	qi := waitDrained(t, insp, drainTimeout)
	stats := stopFleet(t, fleet, stopTimeout)

	rs := up.Requests()
	status := byStatus(rs)
	makespan := span(rs)
	perJob := tokenRate / maxTokens
	ideal := idealMakespan(jobs, perJob, tokBurst/maxTokens)
	worst, _ := excess(arrivals(rs, http.StatusOK), perJob, tokBurst/maxTokens)
	t.Logf("makespan %.3fs, ideal %.3fs under the tokens bucket; worst arrival %.2f jobs ahead of it; answers %v",
		makespan.Seconds(), ideal.Seconds(), worst, status)

	assert.Equal(t, jobs, status[http.StatusOK], "every good job ran once")
	assert.Equal(t, jobs, len(rs), "and no other reached the upstream")
	assert.GreaterOrEqual(t, makespan.Seconds(), 0.9*ideal.Seconds(), "the tokens bucket binds, beside the requests one")
	assert.Less(t, makespan.Seconds(), 3*ideal.Seconds())
	assert.LessOrEqual(t, worst, 1.0, "arrivals keep to the tokens bucket, give or take a job's scheduling jitter")

	assert.Equal(t, 2, qi.Archived)
	reasons := map[string]string{}
	for _, ti := range archivedTasks(t, insp) {
		reasons[ti.ID] = ti.LastErr
	}
	assert.Contains(t, reasons["too-big"], `workers: bad job cost: policy "http:request": limit "tokens": cost 100 is more than its burst 60`)
	assert.Contains(t, reasons["no-body"], `limit "tokens": cost template "{body.max_tokens}": the payload has no "body" string`)
	assert.Equal(t, int64(2), stats.Archived)

	keys, err := srv.Client(t).Keys(context.Background(), keyPrefix+"*").Result()
	require.NoError(t, err)
	assert.Contains(t, keys, keyPrefix+"{http:request}{tokens}:http:request")
	assert.Contains(t, keys, keyPrefix+"{http:request}{requests}:http:request")
}
