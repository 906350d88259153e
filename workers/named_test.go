package workers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// costFrom is CostTemplate(tmpl), which must parse.
func costFrom(t *testing.T, tmpl string) workers.CostFunc {
	t.Helper()
	f, err := workers.CostTemplate(tmpl)
	require.NoError(t, err)
	return f
}

// remaining is what bucket key of policy has left now.
func (h *harness) remaining(t *testing.T, key string, policy throttle.Policy) int {
	t.Helper()
	st, err := h.lim.Peek(context.Background(), key, policy)
	require.NoError(t, err)
	return st.Remaining
}

// A job of a policy with two named limits takes from both buckets in one
// call, all or nothing: a job that one bucket refuses takes nothing from the
// other, whichever refuses. Its cost in each is its own: one request, and
// the tokens its payload says.
func TestPoolNamedLimitsAllOrNothing(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.MaxWait = 50 * time.Millisecond
	cfg.Horizon = 2 * time.Second // a turn an hour off is past it: refused, archived
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	// Slow enough that nothing refills during the test.
	requests := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 3}
	tokens := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 100}
	fewRequests := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	ran := make(chan string, 8)
	handler := func(ctx context.Context, task *asynq.Task) error {
		ran <- task.Type() + " " + string(task.Payload())
		return nil
	}
	llm := workers.Policy{Name: "llm", Limits: []workers.NamedLimit{
		{Name: "requests", Limit: requests},
		{Name: "tokens", Limit: tokens, CostFrom: costFrom(t, "{payload.tokens}")},
	}}
	other := workers.Policy{Name: "other", Limits: []workers.NamedLimit{
		{Name: "requests", Limit: fewRequests},
		{Name: "tokens", Limit: tokens, CostFrom: costFrom(t, "{payload.tokens}")},
	}}
	p.HandleFunc("llm", handler, &llm)
	p.HandleFunc("other", handler, &other)
	start(t, p)

	reqKey, tokKey := workers.BucketKey(llm, "llm", "requests"), workers.BucketKey(llm, "llm", "tokens")
	assert.Equal(t, "{llm}{requests}:llm", reqKey)
	assert.Equal(t, "{llm}{tokens}:llm", tokKey)

	h.enqueue(t, queue.Task{Type: "llm", Payload: []byte(`{"tokens": 60}`)}, asynq.MaxRetry(0))
	assert.Equal(t, `llm {"tokens": 60}`, recv(t, ran, 10*time.Second, "the first job"))
	assert.Equal(t, 2, h.remaining(t, reqKey, requests), "one request taken")
	assert.Equal(t, 40, h.remaining(t, tokKey, tokens), "60 tokens taken")

	// 50 tokens: the tokens bucket refuses, and the requests bucket keeps its 2.
	id := h.enqueue(t, queue.Task{Type: "llm", Payload: []byte(`{"tokens": 50}`)}, asynq.MaxRetry(0))
	info := h.waitState(t, id, asynq.TaskStateArchived, 10*time.Second)
	assert.Contains(t, info.LastErr, "horizon")
	assert.Equal(t, 2, h.remaining(t, reqKey, requests), "the refused job took no request")
	assert.Equal(t, 40, h.remaining(t, tokKey, tokens), "nor any token")

	// 40 fits both.
	h.enqueue(t, queue.Task{Type: "llm", Payload: []byte(`{"tokens": 40}`)}, asynq.MaxRetry(0))
	assert.Equal(t, `llm {"tokens": 40}`, recv(t, ran, 10*time.Second, "the third job"))
	assert.Equal(t, 1, h.remaining(t, reqKey, requests))
	assert.Equal(t, 0, h.remaining(t, tokKey, tokens))

	// The other way round: the requests bucket refuses, the tokens one keeps its tokens.
	oReq, oTok := workers.BucketKey(other, "other", "requests"), workers.BucketKey(other, "other", "tokens")
	h.enqueue(t, queue.Task{Type: "other", Payload: []byte(`{"tokens": 10}`)}, asynq.MaxRetry(0))
	assert.Equal(t, `other {"tokens": 10}`, recv(t, ran, 10*time.Second, "the other's first job"))
	id = h.enqueue(t, queue.Task{Type: "other", Payload: []byte(`{"tokens": 10}`)}, asynq.MaxRetry(0))
	h.waitState(t, id, asynq.TaskStateArchived, 10*time.Second)
	assert.Equal(t, 0, h.remaining(t, oReq, fewRequests))
	assert.Equal(t, 90, h.remaining(t, oTok, tokens), "the job the requests bucket refused took no token")
	select {
	case extra := <-ran:
		t.Fatalf("a refused job ran: %s", extra)
	case <-time.After(100 * time.Millisecond):
	}
}

// A cost template reads each job's cost from its payload, a header or, for
// an http:request job, its request body; a job whose cost is missing, not a
// whole number, less than 1 or more than its bucket's burst is archived at
// once with the reason, never run on a default cost, and takes nothing.
func TestPoolCostTemplates(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	slow := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 100}
	ran := make(chan string, 8)
	handler := func(ctx context.Context, task *asynq.Task) error {
		ran <- task.Type()
		return nil
	}
	byPayload := workers.Policy{Name: "payload", Limit: slow, CostFrom: costFrom(t, "{payload.n}")}
	byHeader := workers.Policy{Name: "header", Limit: slow, CostFrom: costFrom(t, "{header.x-cost}")}
	byBody := workers.Policy{Name: "body", Limits: []workers.NamedLimit{
		{Name: "requests", Limit: slow},
		{Name: "tokens", Limit: slow, CostFrom: costFrom(t, "{body.max_tokens}")},
	}}
	p.HandleFunc("payload", handler, &byPayload)
	p.HandleFunc("header", handler, &byHeader)
	p.HandleFunc("body", handler, &byBody)
	start(t, p)

	h.enqueue(t, queue.Task{Type: "payload", Payload: []byte(`{"n": 7}`)}, asynq.MaxRetry(0))
	assert.Equal(t, "payload", recv(t, ran, 10*time.Second, "the payload job"))
	assert.Equal(t, 93, h.remaining(t, "payload", slow), "cost 7 from the payload")

	h.enqueueRaw(t, asynq.NewTaskWithHeaders("header", nil, map[string]string{"x-cost": "12"}), asynq.MaxRetry(0))
	assert.Equal(t, "header", recv(t, ran, 10*time.Second, "the header job"))
	assert.Equal(t, 88, h.remaining(t, "header", slow), "cost 12 from the header")

	body, err := json.Marshal(map[string]string{"url": "https://api.example.com/v1/messages", "body": `{"model": "m", "max_tokens": 30}`})
	require.NoError(t, err)
	h.enqueue(t, queue.Task{Type: "body", Payload: body}, asynq.MaxRetry(0))
	assert.Equal(t, "body", recv(t, ran, 10*time.Second, "the body job"))
	assert.Equal(t, 99, h.remaining(t, workers.BucketKey(byBody, "body", "requests"), slow), "one request")
	assert.Equal(t, 70, h.remaining(t, workers.BucketKey(byBody, "body", "tokens"), slow), "max_tokens 30 from the body")

	cases := []struct {
		name    string
		task    *asynq.Task
		lastErr string
	}{
		{"payload field missing", asynq.NewTask("payload", []byte(`{"m": 1}`)),
			`workers: bad job cost: policy "payload": cost template "{payload.n}": payload field "n" is missing; archived`},
		{"payload field a string", asynq.NewTask("payload", []byte(`{"n": "7"}`)),
			`payload field "n" is not a number (JSON string)`},
		{"payload field negative", asynq.NewTask("payload", []byte(`{"n": -3}`)), `payload field "n" is -3, negative`},
		{"payload field fractional", asynq.NewTask("payload", []byte(`{"n": 2.5}`)), `payload field "n" is 2.5, not a whole number`},
		{"payload field zero", asynq.NewTask("payload", []byte(`{"n": 0}`)), `payload field "n" is 0: a job costs at least 1`},
		{"payload over the burst", asynq.NewTask("payload", []byte(`{"n": 101}`)),
			`workers: bad job cost: policy "payload": cost 101 is more than its burst 100; archived`},
		{"payload not JSON", asynq.NewTask("payload", []byte(`n=1`)), `payload is not a JSON object`},
		{"header missing", asynq.NewTask("header", nil), `header "x-cost" is missing or empty`},
		{"header not a number", asynq.NewTaskWithHeaders("header", nil, map[string]string{"x-cost": "lots"}),
			`header "x-cost" is not a whole number`},
		{"body missing", asynq.NewTask("body", []byte(`{"url": "https://x/"}`)), `the payload has no "body" string`},
		{"body field over the burst", asynq.NewTask("body", []byte(`{"body": "{\"max_tokens\": 4000}"}`)),
			`workers: bad job cost: policy "body": limit "tokens": cost 4000 is more than its burst 100; archived`},
	}
	for _, c := range cases {
		id := h.enqueueRaw(t, c.task, asynq.MaxRetry(3))
		info := h.waitState(t, id, asynq.TaskStateArchived, 10*time.Second)
		assert.Contains(t, info.LastErr, c.lastErr, c.name)
		assert.Equal(t, 0, info.Retried, c.name)
	}
	assert.Equal(t, int64(len(cases)), p.Stats().Archived)
	assert.Equal(t, 93, h.remaining(t, "payload", slow), "no refused job took a token")
	assert.Equal(t, 88, h.remaining(t, "header", slow))
	assert.Equal(t, 99, h.remaining(t, workers.BucketKey(byBody, "body", "requests"), slow))
	assert.Equal(t, 70, h.remaining(t, workers.BucketKey(byBody, "body", "tokens"), slow))
}

// Named limits with every other option on: a key per tenant, a global
// bucket shared fairly, an adaptive first limit, and a change of limits at
// runtime (SetPolicy). Each tenant's jobs take from the tenant's requests
// and tokens buckets and the global one, under the policy's hash tag; after
// the change, jobs take from the new limits' buckets and every job runs once.
func TestPoolNamedLimitsWithEverything(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	perTenant, err := workers.KeyTemplate("t:{payload.tenant}")
	require.NoError(t, err)
	requests := throttle.Limit{Rate: 1000, Period: time.Second, Burst: 50}
	tokens := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1000}
	global := throttle.Limit{Rate: 1000, Period: time.Second, Burst: 100}
	pol := workers.Policy{Name: "llm", Key: perTenant, Global: global, Fair: true,
		Limit: requests, Adapt: true,
		Limits: []workers.NamedLimit{{Name: "tokens", Limit: tokens, CostFrom: costFrom(t, "{payload.tokens}")}},
	}
	ran := make(chan string, 64)
	p.HandleFunc("llm", func(ctx context.Context, task *asynq.Task) error {
		var v struct{ Tenant string }
		if err := json.Unmarshal(task.Payload(), &v); err != nil {
			return err
		}
		ran <- v.Tenant
		return nil
	}, &pol)
	start(t, p)

	enqueue := func(tenant string, tokens int) {
		h.enqueue(t, queue.Task{Type: "llm", Payload: fmt.Appendf(nil, `{"tenant": %q, "tokens": %d}`, tenant, tokens)}, asynq.MaxRetry(0))
	}
	for range 5 {
		enqueue("a", 10)
		enqueue("b", 20)
	}
	got := map[string]int{}
	for range 10 {
		got[recv(t, ran, 10*time.Second, "a job")]++
	}
	assert.Equal(t, map[string]int{"a": 5, "b": 5}, got)
	assert.Equal(t, "{llm}:t:a", workers.BucketKey(pol, "t:a", ""), "the unnamed limit keeps the global layout")
	assert.Equal(t, 950, h.remaining(t, workers.BucketKey(pol, "t:a", "tokens"), tokens), "a's 5 jobs of 10 tokens")
	assert.Equal(t, 900, h.remaining(t, workers.BucketKey(pol, "t:b", "tokens"), tokens), "b's 5 jobs of 20 tokens")
	keys, err := h.rdb.Keys(context.Background(), h.prefix+"*").Result()
	require.NoError(t, err)
	assert.Contains(t, keys, h.prefix+"{llm}:*global*")
	assert.Contains(t, keys, h.prefix+"{llm}{tokens}:t:a")
	for _, k := range keys {
		assert.Regexp(t, `^`+h.prefix+`\{llm\}`, k, "every bucket carries the policy's hash tag")
	}

	// At runtime: tokens now come from a header-less, fixed cost of 3, in a
	// second named limit beside a daily one.
	daily := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 500}
	changed := pol
	changed.Limits = []workers.NamedLimit{{Name: "tokens", Limit: tokens, Cost: 3}, {Name: "daily", Limit: daily}}
	require.NoError(t, p.SetPolicy("llm", changed))
	for range 4 {
		enqueue("a", 10)
	}
	for range 4 {
		assert.Equal(t, "a", recv(t, ran, 10*time.Second, "a job under the new limits"))
	}
	assert.Equal(t, 938, h.remaining(t, workers.BucketKey(changed, "t:a", "tokens"), tokens), "4 more jobs of 3 tokens")
	assert.Equal(t, 496, h.remaining(t, workers.BucketKey(changed, "t:a", "daily"), daily))
	select {
	case extra := <-ran:
		t.Fatalf("a job of %s ran twice", extra)
	case <-time.After(200 * time.Millisecond):
	}
}
