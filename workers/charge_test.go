package workers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// settleFrom is SettleTemplate(tmpl), which must parse.
func settleFrom(t *testing.T, tmpl string) workers.SettleFunc {
	t.Helper()
	f, err := workers.SettleTemplate(tmpl)
	require.NoError(t, err)
	return f
}

// llmJob is the payload of a job that books maxTokens and whose answer
// says it used used (a negative used: an answer without usage).
func llmJob(maxTokens, used int) []byte {
	b, _ := json.Marshal(map[string]int{"max_tokens": maxTokens, "used": used})
	return b
}

// llmHandler answers each job as an LLM would, with its usage in the
// answer's body, and hands the answer to the pool; it reports each job it
// ran on ran.
func llmHandler(ran chan<- string) func(context.Context, *asynq.Task) error {
	return func(ctx context.Context, task *asynq.Task) error {
		var in struct{ Used int }
		if err := json.Unmarshal(task.Payload(), &in); err != nil {
			return err
		}
		body := `{"id": "msg_1", "content": []}`
		if in.Used >= 0 {
			body = fmt.Sprintf(`{"id": "msg_1", "usage": {"input_tokens": 3, "total_tokens": %d}}`, in.Used)
		}
		workers.ObserveUsage(ctx, http.Header{"Content-Type": {"application/json"}}, []byte(body))
		ran <- string(task.Payload())
		return nil
	}
}

// A tokens bucket charged {payload.max_tokens} up front and settled from
// the answer's usage: the tokens a job did not use go back to the bucket,
// more than it booked are taken on top (a debt), and an answer without
// usage leaves the estimate charged, never a guess that lowers it. The
// requests bucket, without SettleFrom, keeps its cost of 1.
func TestPoolSettleFromAnswer(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	// Slow enough that nothing refills during the test.
	requests := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 10}
	tokens := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 100}
	llm := workers.Policy{Name: "llm", Limits: []workers.NamedLimit{
		{Name: "requests", Limit: requests},
		{Name: "tokens", Limit: tokens, CostFrom: costFrom(t, "{payload.max_tokens}"), SettleFrom: settleFrom(t, "{answer.usage.total_tokens}")},
	}}
	ran := make(chan string, 8)
	p.HandleFunc("llm", llmHandler(ran), &llm)
	start(t, p)
	reqKey, tokKey := workers.BucketKey(llm, "llm", "requests"), workers.BucketKey(llm, "llm", "tokens")
	settled := func(step string, want int) {
		t.Helper()
		waitFor(t, 5*time.Second, step, func() bool { return h.remaining(t, tokKey, tokens) == want })
	}

	steps := []struct {
		maxTokens, used int
		want            int // tokens left once the job is charged
	}{
		{60, 20, 80}, // 40 unused come back
		{30, 50, 30}, // 20 more than booked: taken on top
		{10, -1, 20}, // no usage in the answer: the estimate stays
		{10, 5, 15},  // and the next is settled as before
		{15, 0, 15},  // nothing used: all back
	}
	for i, s := range steps {
		h.enqueue(t, queue.Task{Type: "llm", Payload: llmJob(s.maxTokens, s.used)}, asynq.MaxRetry(0))
		recv(t, ran, 10*time.Second, fmt.Sprintf("step %d: the job", i))
		settled(fmt.Sprintf("step %d: %d tokens left", i, s.want), s.want)
	}
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, 15, h.remaining(t, tokKey, tokens), "no settle after the last")
	assert.Equal(t, 10-len(steps), h.remaining(t, reqKey, requests), "one request per job, not settled")
}

// Settling makes the next job run sooner: a job that booked a whole burst
// of tokens and used a tenth leaves nine tenths for the next at once, where
// without SettleFrom the next waits for the burst to refill (a second).
func TestPoolSettleNextRunsSooner(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	tokens := throttle.Limit{Rate: 100, Period: time.Second, Burst: 100}
	policy := func(name string, settle bool) *workers.Policy {
		l := workers.NamedLimit{Name: "tokens", Limit: tokens, CostFrom: costFrom(t, "{payload.max_tokens}")}
		if settle {
			l.SettleFrom = settleFrom(t, "{answer.usage.total_tokens}")
		}
		return &workers.Policy{Name: name, MaxWait: 5 * time.Second, Limits: []workers.NamedLimit{l}}
	}
	type run struct {
		name string
		at   time.Time
	}
	ran := make(chan run, 8)
	for _, name := range []string{"settled", "estimated"} {
		inner := llmHandler(make(chan string, 8))
		p.HandleFunc(name, func(ctx context.Context, task *asynq.Task) error {
			ran <- run{task.Type(), time.Now()}
			return inner(ctx, task)
		}, policy(name, name == "settled"))
	}
	start(t, p)

	gap := func(name string) time.Duration {
		h.enqueue(t, queue.Task{Type: name, Payload: llmJob(100, 10)}, asynq.MaxRetry(0))
		first := recv(t, ran, 10*time.Second, name+": the first job")
		// Let its charge land: the handler returns right after it reports.
		time.Sleep(50 * time.Millisecond)
		h.enqueue(t, queue.Task{Type: name, Payload: llmJob(90, 10)}, asynq.MaxRetry(0))
		second := recv(t, ran, 10*time.Second, name+": the second job")
		return second.at.Sub(first.at)
	}
	settledGap, estimatedGap := gap("settled"), gap("estimated")
	t.Logf("the second job ran %v after the first with settle, %v without", settledGap, estimatedGap)
	// With settle: 90 back at once (the dequeue takes up to a few task
	// checks). Without: 90 tokens refill at 100/s, 0.9 s after the first.
	assert.Less(t, settledGap, 500*time.Millisecond, "settled: the next runs at once")
	assert.Greater(t, estimatedGap, 850*time.Millisecond, "estimated: the next waits for the refill")
}

// SettleTemplate reads a whole number from 0 up at a dotted path of the
// answer's JSON body or in a header; anything else is an error (the pool
// then keeps the estimate), and a template that is not one placeholder is
// refused at once.
func TestSettleTemplate(t *testing.T) {
	h := http.Header{"X-Tokens-Used": {"42"}, "X-Bad": {"4.5"}}
	body := []byte(`{"usage": {"output_tokens": 17, "total_tokens": 20.0, "neg": -1, "frac": 1.5, "s": "3", "deep": {"n": 0}}, "top": 7}`)
	for i, c := range []struct {
		tmpl string
		want int
		err  string
	}{
		{tmpl: "{answer.usage.output_tokens}", want: 17},
		{tmpl: "{answer.usage.total_tokens}", want: 20},
		{tmpl: "{answer.usage.deep.n}", want: 0},
		{tmpl: "{answer.top}", want: 7},
		{tmpl: "{answer-header.x-tokens-used}", want: 42},
		{tmpl: "{answer.usage.missing}", err: `answer field "usage.missing" is missing`},
		{tmpl: "{answer.nothing.n}", err: `answer field "nothing" is missing`},
		{tmpl: "{answer.top.n}", err: `answer field "top" is not an object`},
		{tmpl: "{answer.usage.neg}", err: "negative"},
		{tmpl: "{answer.usage.frac}", err: "not a whole number"},
		{tmpl: "{answer.usage.s}", err: "not a number (JSON string)"},
		{tmpl: "{answer-header.x-bad}", err: "not a whole number"},
		{tmpl: "{answer-header.x-none}", err: "missing or empty"},
	} {
		f, err := workers.SettleTemplate(c.tmpl)
		require.NoError(t, err, "case %d", i)
		n, err := f(h, body)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, "case %d: %s", i, c.tmpl)
			continue
		}
		assert.NoError(t, err, "case %d", i)
		assert.Equal(t, c.want, n, "case %d: %s", i, c.tmpl)
	}
	f := settleFrom(t, "{answer.usage.total_tokens}")
	_, err := f(nil, []byte("not json"))
	assert.ErrorContains(t, err, "body is not a JSON object")

	for i, bad := range []string{"", "answer.usage", "{answer}", "{answer.}", "{answer.a..b}", "{body.x}", "{answer-header.}", "{answer.a b}", "{answer.a.b.c.d.e.f.g.h.i}"} {
		_, err := workers.SettleTemplate(bad)
		assert.Error(t, err, "case %d: %q", i, bad)
	}
}

// Settle with the other options on: a key per tenant, a global bucket
// shared fairly, an adaptive upstream bucket, named limits, and a policy
// set at runtime (SetPolicy, as `sluice set` does). Each tenant's tokens
// bucket is charged what its jobs used; a policy set without settle
// leaves the estimate charged, and setting one with it back settles again.
func TestPoolSettleWithEveryOption(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	requests := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 20}
	tokens := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 100}
	global := throttle.Limit{Rate: 100, Period: time.Second, Burst: 100} // fast: no key is ever over its share
	key, err := workers.KeyTemplate("tenant:{payload.tenant}")
	require.NoError(t, err)
	policy := func(settle bool) workers.Policy {
		tok := workers.NamedLimit{Name: "tokens", Limit: tokens, CostFrom: costFrom(t, "{payload.max_tokens}")}
		if settle {
			tok.SettleFrom = settleFrom(t, "{answer.usage.total_tokens}")
		}
		return workers.Policy{Name: "llm", Key: key, Global: global, Fair: true, Adapt: true,
			Limits: []workers.NamedLimit{{Name: "requests", Limit: requests}, tok}}
	}
	pol := policy(true)
	ran := make(chan string, 16)
	p.HandleFunc("llm", llmHandler(ran), &pol)
	start(t, p)

	job := func(tenant string, maxTokens, used int) []byte {
		b, _ := json.Marshal(map[string]any{"tenant": tenant, "max_tokens": maxTokens, "used": used})
		return b
	}
	tokKey := func(tenant string) string { return workers.BucketKey(pol, "tenant:"+tenant, "tokens") }
	left := func(tenant string, want int, what string) {
		t.Helper()
		waitFor(t, 5*time.Second, what, func() bool { return h.remaining(t, tokKey(tenant), tokens) == want })
	}
	h.enqueue(t, queue.Task{Type: "llm", Payload: job("a", 50, 10)}, asynq.MaxRetry(0))
	h.enqueue(t, queue.Task{Type: "llm", Payload: job("b", 40, 45)}, asynq.MaxRetry(0))
	recv(t, ran, 10*time.Second, "a job")
	recv(t, ran, 10*time.Second, "the other job")
	left("a", 90, "tenant a: 40 unused back")
	left("b", 55, "tenant b: 5 more taken on top")

	// Set at runtime without settle: the estimate stays charged.
	require.NoError(t, p.SetPolicy("llm", policy(false)))
	h.enqueue(t, queue.Task{Type: "llm", Payload: job("a", 30, 10)}, asynq.MaxRetry(0))
	recv(t, ran, 10*time.Second, "the job under the policy without settle")
	left("a", 60, "tenant a: charged its estimate")
	// And with it again: settled.
	require.NoError(t, p.SetPolicy("llm", policy(true)))
	h.enqueue(t, queue.Task{Type: "llm", Payload: job("a", 30, 10)}, asynq.MaxRetry(0))
	recv(t, ran, 10*time.Second, "the job under the policy with settle")
	left("a", 50, "tenant a: 20 unused back")
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, 50, h.remaining(t, tokKey("a"), tokens))
}
