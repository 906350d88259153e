package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/httpjob"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
)

// llmConfig makes the fake upstream an LLM API (upstreamConfig.LLM): it
// limits tokens per second with a token bucket of its own, charges each
// request its max_tokens up front, answers 429 with Retry-After when they
// are not there, and, once it has answered, gives back what the request did
// not use, as OpenAI and Anthropic do. The request body says what the fake
// model uses ("use"); the answer says it in usage.total_tokens.
type llmConfig struct {
	TokenRate  float64 // tokens per second
	TokenBurst int
	// Latency is how long the model takes to answer; the unused tokens go
	// back then.
	Latency time.Duration
}

// llmState is the LLM upstream's token bucket; upstream.mu guards it.
type llmState struct {
	tat time.Time
}

// serveLLM answers a request as the fake LLM does; status and the request's
// record are as serve's.
func (u *upstream) serveLLM(w http.ResponseWriter, r *http.Request) {
	var in struct {
		MaxTokens int `json:"max_tokens"`
		Use       int `json:"use"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &in); err != nil || in.MaxTokens < 1 || in.Use > in.MaxTokens {
		http.Error(w, `{"error": "bad request"}`, http.StatusBadRequest)
		return
	}
	c := u.cfg.LLM
	interval := time.Duration(float64(time.Second) / c.TokenRate)
	u.mu.Lock()
	// The instant of the decision, read under the lock (as upstream.decide
	// does): decisions in the order of their instants.
	now := time.Now()
	tat := u.llm.tat
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(time.Duration(in.MaxTokens) * interval)
	status, retryAfter := http.StatusOK, ""
	if over := next.Sub(now) - time.Duration(c.TokenBurst)*interval; over > u.cfg.Jitter {
		status, retryAfter = http.StatusTooManyRequests, strconv.Itoa(int(over.Seconds())+1)
	} else {
		u.llm.tat = next // charged max_tokens now
	}
	u.reqs = append(u.reqs, request{At: now, Status: status, ID: r.URL.Query().Get("id"), Used: in.Use})
	u.mu.Unlock()
	if status == http.StatusOK {
		time.Sleep(c.Latency)
		// What the answer did not use goes back as it is sent, the bucket
		// never above full.
		u.mu.Lock()
		u.llm.tat = u.llm.tat.Add(-time.Duration(in.MaxTokens-in.Use) * interval)
		if now := time.Now(); u.llm.tat.Before(now) {
			u.llm.tat = now
		}
		u.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	if status != http.StatusOK {
		w.Header().Set("Retry-After", retryAfter)
		w.WriteHeader(status)
		fmt.Fprintln(w, `{"error": {"type": "rate_limit_error"}}`)
		return
	}
	// The text comes first and is longer than the 4 KiB the job keeps for
	// the rate-limit fields: usage is read from further into the body.
	fmt.Fprintf(w, `{"id": "msg", "choices": [{"text": %q}], "usage": {"prompt_tokens": 0, "completion_tokens": %d, "total_tokens": %d}}`+"\n",
		strings.Repeat("lorem ipsum ", 500), in.Use, in.Use)
}

// runLLM sends jobs of maxTokens each, which use use tokens, through a
// fleet of workers whose tokens limit is the upstream's, charged
// {body.max_tokens} and, with settle, settled from usage.total_tokens. It
// returns the makespan, the ideal from the tokens used, and the answers.
func runLLM(t *testing.T, workers, jobs, maxTokens, use int, c llmConfig, settle bool) (time.Duration, time.Duration, map[int]int) {
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{LLM: &c, Jitter: 5 * time.Millisecond})
	tokens := fmt.Sprintf("http:request=%g/s,burst=%d,name=tokens,cost={body.max_tokens}", c.TokenRate, c.TokenBurst)
	if settle {
		tokens += ",settle={answer.usage.total_tokens}"
	}
	fleet := startFleet(t, srv, insp, workers, "--concurrency", "10",
		"--limit", "http:request=1000/s,burst=100,name=requests,adapt=off",
		"--limit", tokens)
	qc := queue.NewClient(asynq.NewClientFromRedisClient(srv.Client(t)))
	for _, id := range jobIDs("llm", jobs) {
		p, err := json.Marshal(httpjob.Request{URL: up.URL(id, ""), Method: http.MethodPost,
			Body: fmt.Sprintf(`{"model": "m", "max_tokens": %d, "use": %d}`, maxTokens, use)})
		require.NoError(t, err)
		_, err = qc.Enqueue(context.Background(), queue.Task{Type: "http:request", Payload: p}, asynq.TaskID(id), asynq.MaxRetry(3))
		require.NoError(t, err)
	}
	qi := waitDrained(t, insp, drainTimeout)
	stopFleet(t, fleet, stopTimeout)
	rs := up.Requests()
	assert.Equal(t, 0, qi.Archived, "none archived")
	assert.Equal(t, jobs, okByIDCount(rs), "every job answered 200 once")
	used := 0
	for _, r := range rs {
		if r.Status == http.StatusOK {
			used += r.Used
		}
	}
	ideal := time.Duration(float64(used-c.TokenBurst) / c.TokenRate * float64(time.Second))
	var refusedAt []string
	for _, r := range rs {
		if r.Status != http.StatusOK {
			refusedAt = append(refusedAt, fmt.Sprintf("+%.3fs", r.At.Sub(rs[0].At).Seconds()))
		}
	}
	if len(refusedAt) > 0 {
		t.Logf("refused at %v", refusedAt)
	}
	return span(rs), ideal, byStatus(rs)
}

// okByIDCount is how many jobs were answered 200, each counted once.
func okByIDCount(rs []request) int { return len(okByID(rs)) }

// An LLM API charges max_tokens up front and gives back what the answer did
// not use (usage). With settle={answer.usage.total_tokens} on the tokens
// limit, a fleet of three workers charges what the jobs really used, and
// finishes within 1.25× the ideal makespan computed from those tokens,
// where without settle it is bound by max_tokens (TestLLMWithoutSettle):
// issue #30's bar.
func TestLLMSettleMakespan(t *testing.T) {
	const (
		jobs      = 240
		maxTokens = 100
		use       = 20
	)
	c := llmConfig{TokenRate: 1000, TokenBurst: 500}
	makespan, ideal, status := runLLM(t, 3, jobs, maxTokens, use, c, true)
	bound := time.Duration(float64(jobs*maxTokens-c.TokenBurst) / c.TokenRate * float64(time.Second))
	t.Logf("settled: makespan %.3fs, ideal from the tokens used %.3fs (%.2f×); bound by max_tokens %.3fs; answers %v",
		makespan.Seconds(), ideal.Seconds(), makespan.Seconds()/ideal.Seconds(), bound.Seconds(), status)
	assert.LessOrEqual(t, makespan.Seconds(), 1.25*ideal.Seconds(), "within 1.25× the ideal from the tokens used")
	assert.LessOrEqual(t, status[http.StatusTooManyRequests], jobs/100, "at most 1%% refused")
}

// The same with a model that answers in 200 ms, longer than a job's
// max_tokens take to come back (100 ms): the upstream holds each call's
// max_tokens until it answers, so the best a client can do is
// bestAdmitted's (5.10 s, 1.19x the ideal from the tokens used); settled by
// the upstream's rule (throttle.Bucket.UpstreamSettle), the fleet took
// 5.14-5.18 s (1.20-1.21x that ideal, the bar being 1.25x) when no
// request was refused, where the settled-cost rule gave nothing back and
// was bound by max_tokens (23.5 s). A refund counted while another job's
// grant is still on its way to the upstream can be larger than the
// upstream's (it clamps at full without that grant): one refusal in some
// runs, early, which this fake makes wait a whole second. Bounded at 1.5x
// the best the upstream admits for that.
func TestLLMSettleMakespanLatency(t *testing.T) {
	const (
		jobs      = 240
		maxTokens = 100
		use       = 20
	)
	c := llmConfig{TokenRate: 1000, TokenBurst: 500, Latency: 200 * time.Millisecond}
	makespan, ideal, status := runLLM(t, 3, jobs, maxTokens, use, c, true)
	best := bestAdmitted(jobs, maxTokens, use, c, 30)
	t.Logf("settled, 200 ms answers: makespan %.3fs; ideal from the tokens used %.3fs (%.2f×); the best the upstream admits %.3fs (%.2f×); answers %v",
		makespan.Seconds(), ideal.Seconds(), makespan.Seconds()/ideal.Seconds(), best.Seconds(), makespan.Seconds()/best.Seconds(), status)
	assert.LessOrEqual(t, makespan.Seconds(), 1.5*best.Seconds(), "within 1.5× the best the upstream admits")
	assert.LessOrEqual(t, status[http.StatusTooManyRequests], jobs/50, "at most 2%% refused")
}

// Without settle, the same jobs are charged max_tokens: the makespan is
// bound by it, five times the tokens they use.
func TestLLMWithoutSettle(t *testing.T) {
	const (
		jobs      = 60
		maxTokens = 100
		use       = 20
	)
	c := llmConfig{TokenRate: 1000, TokenBurst: 500}
	makespan, ideal, status := runLLM(t, 1, jobs, maxTokens, use, c, false)
	bound := time.Duration(float64(jobs*maxTokens-c.TokenBurst) / c.TokenRate * float64(time.Second))
	t.Logf("estimated: makespan %.3fs, ideal from the tokens used %.3fs (%.2f×); bound by max_tokens %.3fs; answers %v",
		makespan.Seconds(), ideal.Seconds(), makespan.Seconds()/ideal.Seconds(), bound.Seconds(), status)
	assert.GreaterOrEqual(t, makespan.Seconds(), 0.95*bound.Seconds(), "bound by max_tokens")
	assert.Equal(t, 0, status[http.StatusTooManyRequests])
}

// TestLLMSettleLatency measures settle when the model takes longer to
// answer than the bucket takes to refill a job's max_tokens (100 ms here).
// A settled limit gives back what the job did not use as the upstream does
// when it answers (throttle.Bucket.UpstreamSettle), however long the call
// took. The ideal from the tokens used ignores the latency: the upstream
// itself holds each call's max_tokens until it answers, so the best a
// client can do is bestAdmitted's, which the test logs beside it. Run with
// SLUICE_LLM_LATENCY=1; it only reports its figures.
func TestLLMSettleLatency(t *testing.T) {
	if os.Getenv("SLUICE_LLM_LATENCY") == "" {
		t.Skip("a measurement: set SLUICE_LLM_LATENCY=1")
	}
	const (
		maxTokens = 100
		use       = 20
	)
	for _, run := range []struct {
		lat  time.Duration
		jobs int
	}{{20 * time.Millisecond, 60}, {200 * time.Millisecond, 60}, {200 * time.Millisecond, 240}} {
		c := llmConfig{TokenRate: 1000, TokenBurst: 500, Latency: run.lat}
		makespan, ideal, status := runLLM(t, 3, run.jobs, maxTokens, use, c, true)
		best := bestAdmitted(run.jobs, maxTokens, use, c, 30)
		t.Logf("latency %v, %d jobs, settled: makespan %.3fs; ideal from the tokens used %.3fs (%.2f×); the best the upstream admits %.3fs (%.2f×); answers %v",
			run.lat, run.jobs, makespan.Seconds(), ideal.Seconds(), makespan.Seconds()/ideal.Seconds(),
			best.Seconds(), makespan.Seconds()/best.Seconds(), status)
	}
}

// bestAdmitted is the makespan of the best schedule the fake LLM upstream
// admits for jobs calls of maxTokens using use each, at most conc at once:
// each call sent as soon as the upstream's bucket holds its max_tokens, its
// unused part back when it answers, Latency later (the bucket never above
// full). A simulation in steps of 100 µs.
func bestAdmitted(jobs, maxTokens, use int, c llmConfig, conc int) time.Duration {
	const step = 100 * time.Microsecond
	level, t := float64(c.TokenBurst), time.Duration(0)
	var answers []time.Duration // when each call in flight answers
	last := time.Duration(0)
	for sent := 0; sent < jobs; t += step {
		level = min(float64(c.TokenBurst), level+c.TokenRate*step.Seconds())
		for len(answers) > 0 && answers[0] <= t {
			level = min(float64(c.TokenBurst), level+float64(maxTokens-use))
			answers = answers[1:]
		}
		for sent < jobs && level >= float64(maxTokens) && len(answers) < conc {
			level -= float64(maxTokens)
			answers = append(answers, t+c.Latency)
			last, sent = t, sent+1
		}
	}
	return last
}
