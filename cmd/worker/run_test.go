package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/httpjob"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/sleepjob"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
)

func TestUnreachableQueueRedis(t *testing.T) {
	dead, addr := deadURL(t)
	limiter := redistest.Shared(t)
	start := time.Now()
	r := runArgs(context.Background(), "--redis", dead, "--limiter-redis", limiter.URL(), "--unlimited", "sleep")
	assert.Equal(t, cli.ExitFailure, r.code)
	assert.Equal(t, "worker: cannot reach queue Redis at redis://worker:xxxxx@"+addr+"/0: connection refused\n", r.stderr)
	assert.Empty(t, r.stdout)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestUnreachableLimiterRedis(t *testing.T) {
	dead, addr := deadURL(t)
	queues := redistest.Shared(t)
	r := runArgs(context.Background(), "--redis", queues.URL(), "--limiter-redis", dead, "--unlimited", "sleep")
	assert.Equal(t, cli.ExitFailure, r.code)
	assert.Equal(t, "worker: cannot reach limiter Redis at redis://worker:xxxxx@"+addr+"/0: connection refused\n", r.stderr)
}

// Both down: both are named, the queue Redis first. One Redis for both is
// asked once, as the queue Redis.
func TestUnreachableBoth(t *testing.T) {
	deadQ, addrQ := deadURL(t)
	deadL, addrL := deadURL(t)
	r := runArgs(context.Background(), "--redis", deadQ, "--limiter-redis", deadL, "--unlimited", "sleep")
	assert.Equal(t, cli.ExitFailure, r.code)
	assert.Equal(t, "worker: cannot reach queue Redis at redis://worker:xxxxx@"+addrQ+"/0: connection refused\n"+
		"worker: cannot reach limiter Redis at redis://worker:xxxxx@"+addrL+"/0: connection refused\n", r.stderr)

	t.Setenv("REDIS_URL", deadQ)
	r = runArgs(context.Background(), "--unlimited", "sleep")
	assert.Equal(t, cli.ExitFailure, r.code)
	assert.Equal(t, "worker: cannot reach queue Redis at redis://worker:xxxxx@"+addrQ+"/0: connection refused\n", r.stderr)
}

func TestWrongPassword(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "right")
	url := "redis://:hunter2@" + srv.Addr() + "/0"
	r := runArgs(context.Background(), "--redis", redistest.Shared(t).URL(), "--limiter-redis", url, "--unlimited", "sleep")
	assert.Equal(t, cli.ExitFailure, r.code)
	assert.True(t, strings.HasPrefix(r.stderr, "worker: cannot use limiter Redis at redis://:xxxxx@"+srv.Addr()+"/0: WRONGPASS"), r.stderr)
	assert.NotContains(t, r.stderr, "hunter2")
}

func TestInterruptedBeforeStart(t *testing.T) {
	srv := redistest.Start(t)
	srv.Pause(t)
	defer srv.Resume(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(200*time.Millisecond, cancel)
	r := runArgs(ctx, "--redis", srv.URL(), "--unlimited", "sleep")
	assert.Equal(t, cli.ExitInterrupted, r.code)
	assert.Equal(t, "worker: interrupted before starting\n", r.stderr)
}

func TestWarnings(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime}))
	c, err := parseFlags([]string{"--redis", "redis://q", "--hosts", "3", "--failure-policy", "open"})
	require.NoError(t, err)
	limits, err := loadLimits([]string{"http:request=5/s"}, "")
	require.NoError(t, err)
	idle, err := runnable(c, limits, builtinHandlers(c))
	require.NoError(t, err)
	warn(log, c, idle)
	assert.Equal(t, `level=WARN msg="--hosts 3 is used only with --failure-policy local; ignored"
level=INFO msg="type sleep has no limit and no --unlimited: this worker does not run its jobs, which go back to their queue"
level=WARN msg="--failure-policy open: while the limiter Redis is down, jobs run with no limit at all"
`, buf.String())
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// upstream is an HTTP server that counts requests; a request to /slow
// waits until release is closed.
type upstream struct {
	*httptest.Server
	requests    atomic.Int64
	slowStarted chan struct{}
	release     chan struct{}
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{slowStarted: make(chan struct{}, 1), release: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			u.slowStarted <- struct{}{}
			<-u.release
		}
		u.requests.Add(1)
		fmt.Fprintln(w, "done")
	}))
	t.Cleanup(u.Close)
	return u
}

var (
	metricsAddrRe = regexp.MustCompile(`msg="serving metrics" addr=(\S+)`)
	stoppedRe     = regexp.MustCompile(`level=INFO msg="worker stopped" processed=(\d+) failed=(\d+) requeued=(\d+) cooldowns=(\d+) archived=(\d+) waiting=(\d+) rates="([^"]*)" limiter=(\w+)\n`)
)

// A real run: jobs enqueued with queue.Client are processed under their
// limit, /metrics serves sluice's metrics and /healthz says ok; at the end
// of ctx the worker lets its running job finish, answering 503 on /healthz
// meanwhile, logs its final line and exits 0.
func TestRun(t *testing.T) {
	queues := redistest.Start(t) // asynq's keys are fixed: a server of its own
	limiter := redistest.Shared(t)
	up := newUpstream(t)

	qc := queue.NewClient(asynq.NewClientFromRedisClient(queues.Client(t)))
	const jobs = 5
	for i := range jobs {
		_, err := qc.Enqueue(context.Background(), queue.Task{
			Type:    httpjob.TaskType,
			Payload: fmt.Appendf(nil, `{"url": %q, "method": "POST", "body": "job %d"}`, up.URL+"/hook", i),
		})
		require.NoError(t, err)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{
			"--redis", queues.URL(), "--limiter-redis", limiter.URL(), "--key-prefix", redistest.Prefix(t),
			"--limit", "http:request=50/s,burst=5,in-flight=auto:1-20", "--metrics-addr", "127.0.0.1:0",
			"--status-interval", "100ms", "--shutdown-timeout", "10s",
		}, io.Discard, &stderr)
	}()

	var addr string
	require.Eventually(t, func() bool {
		m := metricsAddrRe.FindStringSubmatch(stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, 10*time.Second, 10*time.Millisecond, "no metrics address in\n%s", &stderr)
	require.Eventually(t, func() bool { return up.requests.Load() == jobs }, 15*time.Second, 10*time.Millisecond,
		"upstream got %d of %d requests:\n%s", up.requests.Load(), jobs, &stderr)

	code, body := get(t, "http://"+addr+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)
	require.Eventually(t, func() bool {
		_, body := get(t, "http://"+addr+"/metrics")
		return strings.Contains(body, `sluice_jobs_processed_total{`) &&
			regexp.MustCompile(`sluice_jobs_processed_total\{[^}]*sluice_outcome="done"[^}]*sluice_policy="http:request"[^}]*\} 5\n`).MatchString(body)
	}, 5*time.Second, 50*time.Millisecond, "no sluice_jobs_processed_total of 5")
	_, metrics := get(t, "http://"+addr+"/metrics")
	assert.Contains(t, metrics, "sluice_throttle_acquisitions_total{")
	assert.Contains(t, metrics, `service_name="sluice-worker"`)
	assert.Contains(t, metrics, "go_goroutines ")
	assert.NotContains(t, metrics, "otel_scope_", "no scope labels")
	assert.Regexp(t, `sluice_throttle_adaptive_rate_per_second\{[^}]*sluice_policy="http:request"[^}]*sluice_reason="ceiling"[^}]*\} 50\n`, metrics,
		"the adaptive limit's effective rate, at its ceiling")
	assert.Regexp(t, `sluice_throttle_inflight_bound\{[^}]*sluice_policy="http:request"[^}]*\} \d+\n`, metrics,
		"the automatic in-flight bound")
	assert.Contains(t, metrics, "sluice_throttle_inflight_baseline_seconds{")
	docs := readDoc(t, "docs/metrics.md")
	served := regexp.MustCompile(`(?m)^# TYPE (sluice_\w+) `).FindAllStringSubmatch(metrics, -1)
	assert.GreaterOrEqual(t, len(served), 4, "sluice's metrics on /metrics")
	for _, m := range served {
		assert.Contains(t, docs, "`"+m[1]+"`", "docs/metrics.md lists every metric the worker serves")
	}
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), `msg="worker status" processed=`) },
		5*time.Second, 10*time.Millisecond, "no status line")

	// A job that is running when the worker is told to stop finishes first.
	_, err := qc.Enqueue(context.Background(), queue.Task{
		Type:    httpjob.TaskType,
		Payload: fmt.Appendf(nil, `{"url": %q}`, up.URL+"/slow"),
	})
	require.NoError(t, err)
	select {
	case <-up.slowStarted:
	case <-time.After(15 * time.Second):
		t.Fatalf("the slow job did not start:\n%s", &stderr)
	}
	cancel(errors.New("test is done"))
	require.Eventually(t, func() bool {
		code, _ := get(t, "http://"+addr+"/healthz")
		return code == http.StatusServiceUnavailable
	}, 5*time.Second, 10*time.Millisecond, "/healthz still ok while stopping")
	select {
	case code := <-done:
		t.Fatalf("the worker exited with %d before its running job finished:\n%s", code, &stderr)
	case <-time.After(100 * time.Millisecond):
	}
	close(up.release)

	select {
	case code := <-done:
		assert.Equal(t, cli.ExitOK, code, "%s", &stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("the worker did not stop:\n%s", &stderr)
	}
	assert.EqualValues(t, jobs+1, up.requests.Load())
	out := stderr.String()
	assert.Contains(t, out, `msg="worker stopping" cause="test is done"`)
	m := stoppedRe.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	assert.Equal(t, []string{"6", "0", "0", "0", "0", "0"}, m[1:7])
	assert.Regexp(t, `^http:request \d+\.\d/s of 50/s, in flight \d+ of auto 1-20: \d+ held, baseline \S+, recent \S+, [a-z-]+$`, m[7])
	assert.Equal(t, throttle.ModeShared, m[8])
	assert.True(t, strings.HasSuffix(out, m[0]), "the final line is the last")
	assert.NotContains(t, out, "level=ERROR")

	// The metrics server is gone with the worker.
	_, err = http.Get("http://" + addr + "/healthz")
	assert.Error(t, err)
}

// Sleep jobs and a bad one: the demo type runs under a keyed limit, a bad
// payload fails and is archived at once (by asynq: SkipRetry), and a limit for a type this binary cannot run is only a warning.
func TestRunSleep(t *testing.T) {
	queues := redistest.Start(t)
	qc := queue.NewClient(asynq.NewClientFromRedisClient(queues.Client(t)))
	for _, p := range []string{`{"ms": 10, "tenant": "a"}`, `{"ms": 10, "tenant": "b"}`, `{"ms": "soon", "tenant": "c"}`} {
		_, err := qc.Enqueue(context.Background(), queue.Task{Type: sleepjob.TaskType, Payload: []byte(p)}, asynq.MaxRetry(3))
		require.NoError(t, err)
	}
	// A type the worker has no limit for is not run, and not lost: it goes back.
	_, err := qc.Enqueue(context.Background(), queue.Task{Type: "http:request", Payload: []byte(`{"url": "http://127.0.0.1:1/"}`)}, asynq.MaxRetry(0))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{
			"--redis", queues.URL(), "--key-prefix", redistest.Prefix(t), "--status-interval", "0",
			"--limit", "sleep=100/s,key=tenant:{payload.tenant}", "--log-format", "json",
		}, io.Discard, &stderr)
	}()
	insp := asynq.NewInspectorFromRedisClient(queues.Client(t))
	require.Eventually(t, func() bool {
		info, err := insp.GetQueueInfo("default")
		return err == nil && info.Completed+info.Processed >= 2 && info.Archived == 1 && info.Scheduled == 1
	}, 15*time.Second, 20*time.Millisecond, "%s", &stderr)
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, cli.ExitOK, code, "%s", &stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("the worker did not stop:\n%s", &stderr)
	}
	out := stderr.String()
	assert.Contains(t, out, `"msg":"type http:request has no limit and no --unlimited: this worker does not run its jobs`)
	assert.Regexp(t, `"msg":"worker stopped","processed":2,"failed":1,"requeued":1,"cooldowns":0,"archived":1,"waiting":0,"rates":"sleep \d+\.\d/s over all keys, 100/s per key","limiter":"shared"}\n$`, out)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// With --failure-policy local, a limiter Redis that goes away switches the
// limiter to this process's share of each limit, said in the log and the
// status line, and jobs keep running; when it is back, the limiter is shared
// again.
func TestRunLimiterFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a Redis")
	}
	queues := redistest.Start(t)
	limiter := redistest.Start(t)
	qc := queue.NewClient(asynq.NewClientFromRedisClient(queues.Client(t)))
	enqueue := func(n int) {
		t.Helper()
		for range n {
			_, err := qc.Enqueue(context.Background(), queue.Task{Type: sleepjob.TaskType, Payload: []byte(`{"ms": 1}`)})
			require.NoError(t, err)
		}
	}
	insp := asynq.NewInspectorFromRedisClient(queues.Client(t))
	completed := func(n int) func() bool {
		return func() bool {
			info, err := insp.GetQueueInfo("default")
			return err == nil && info.Processed >= n
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{
			"--redis", queues.URL(), "--limiter-redis", limiter.URL(), "--limit", "sleep=100/s,burst=10",
			"--failure-policy", "local", "--hosts", "2", "--status-interval", "100ms",
		}, io.Discard, &stderr)
	}()
	enqueue(3)
	require.Eventually(t, completed(3), 15*time.Second, 20*time.Millisecond, "%s", &stderr)

	limiter.Kill(t)
	enqueue(3)
	require.Eventually(t, completed(6), 15*time.Second, 20*time.Millisecond, "%s", &stderr)
	require.Eventually(t, func() bool {
		out := stderr.String()
		return strings.Contains(out, `level=WARN msg="limiter Redis down: each process takes its share of every limit until it answers (--failure-policy local)"`) &&
			strings.Contains(out, "limiter=fallback")
	}, 5*time.Second, 20*time.Millisecond, "%s", &stderr)

	limiter.Restart(t)
	require.Eventually(t, func() bool {
		enqueue(1) // a call after the probe interval asks the store again
		return strings.Contains(stderr.String(), `level=INFO msg="limiter Redis back: jobs take their turns from the shared limits again"`)
	}, 15*time.Second, 500*time.Millisecond, "%s", &stderr)

	cancel()
	select {
	case code := <-done:
		assert.Equal(t, cli.ExitOK, code, "%s", &stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("the worker did not stop:\n%s", &stderr)
	}
	m := stoppedRe.FindStringSubmatch(stderr.String())
	require.NotNil(t, m, "%s", &stderr)
	assert.Equal(t, []string{"0", "0", "0", "0"}, []string{m[2], m[4], m[5], m[6]}, "failed, cooldowns, archived, waiting")
	assert.Equal(t, throttle.ModeShared, m[8])
}

// With --failure-policy closed, a limiter Redis that goes away is one WARN
// line, however many jobs go back meanwhile, and the status line says
// limiter=closed; its return is one INFO line, and the jobs that went back
// run then.
func TestRunLimiterDownClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a Redis")
	}
	queues := redistest.Start(t)
	limiter := redistest.Start(t)
	qc := queue.NewClient(asynq.NewClientFromRedisClient(queues.Client(t)))
	enqueue := func(n int) {
		t.Helper()
		for range n {
			_, err := qc.Enqueue(context.Background(), queue.Task{Type: sleepjob.TaskType, Payload: []byte(`{"ms": 1}`)}, asynq.MaxRetry(0))
			require.NoError(t, err)
		}
	}
	insp := asynq.NewInspectorFromRedisClient(queues.Client(t))
	var stderr syncBuffer
	statusRe := regexp.MustCompile(`msg="worker status" processed=(\d+) `)
	processed := func() int { // as the latest status line says
		all := statusRe.FindAllStringSubmatch(stderr.String(), -1)
		if len(all) == 0 {
			return 0
		}
		n, _ := strconv.Atoi(all[len(all)-1][1])
		return n
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{
			"--redis", queues.URL(), "--limiter-redis", limiter.URL(), "--limit", "sleep=100/s,burst=10",
			"--status-interval", "200ms",
		}, io.Discard, &stderr)
	}()
	enqueue(2)
	require.Eventually(t, func() bool { return processed() == 2 }, 15*time.Second, 20*time.Millisecond, "%s", &stderr)

	limiter.Kill(t)
	enqueue(10)
	const down = `level=WARN msg="limiter Redis down: jobs go back to their queue until it answers (--failure-policy closed)"`
	require.Eventually(t, func() bool {
		return strings.Contains(stderr.String(), down) && strings.Contains(stderr.String(), "limiter=closed")
	}, 10*time.Second, 20*time.Millisecond, "%s", &stderr)
	time.Sleep(1500 * time.Millisecond) // jobs come back and fail again meanwhile
	assert.Equal(t, 1, strings.Count(stderr.String(), down), "one line for the outage: %s", &stderr)
	assert.Equal(t, 2, processed(), "nothing ran without the limiter")

	limiter.Restart(t)
	require.Eventually(t, func() bool { return processed() == 12 }, 30*time.Second, 100*time.Millisecond, "%s", &stderr)
	out := stderr.String()
	assert.Equal(t, 1, strings.Count(out, `msg="limiter Redis back: `), "%s", out)
	assert.Equal(t, 1, strings.Count(out, down), "%s", out)
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, cli.ExitOK, code, "%s", &stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("the worker did not stop:\n%s", &stderr)
	}
	info, err := insp.GetQueueInfo("default")
	require.NoError(t, err)
	assert.Zero(t, info.Archived, "none archived")
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, the worker exports its spans and
// metrics over OTLP/HTTP: a collector stand-in receives protobuf posts on
// /v1/traces and /v1/metrics while jobs run.
func TestRunExportsOTLP(t *testing.T) {
	var (
		mu    sync.Mutex
		posts = map[string]int{}
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && r.Header.Get("Content-Type") == "application/x-protobuf" && len(body) > 0 {
			mu.Lock()
			posts[r.URL.Path]++
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "200")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200")

	queues := redistest.Start(t)
	qc := queue.NewClient(asynq.NewClientFromRedisClient(queues.Client(t)))
	for range 3 {
		_, err := qc.Enqueue(context.Background(), queue.Task{Type: sleepjob.TaskType, Payload: []byte(`{"ms": 1}`)})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--redis", queues.URL(), "--key-prefix", redistest.Prefix(t), "--limit", "sleep=100/s"}, io.Discard, &stderr)
	}()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return posts["/v1/traces"] > 0 && posts["/v1/metrics"] > 0
	}, 15*time.Second, 50*time.Millisecond, "the collector got %v:\n%s", posts, &stderr)
	cancel()
	assert.Equal(t, cli.ExitOK, <-done, "%s", &stderr)
}

func TestBadOTELSettings(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	r := runArgs(context.Background(), "--redis", "redis://127.0.0.1:1/0", "--unlimited", "sleep")
	assert.Equal(t, cli.ExitUsage, r.code)
	assert.Equal(t, "worker: OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\": this worker speaks OTLP over http/protobuf only\n", r.stderr)
}

// readDoc reads a file of the repository by its path from the top.
func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	require.NoError(t, err)
	return string(b)
}

// The Grafana dashboard is JSON and queries only metrics docs/metrics.md lists.
func TestGrafanaDashboard(t *testing.T) {
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(readDoc(t, "docs/grafana/sluice.json")), &dash))
	require.NotEmpty(t, dash.Panels)
	docs := readDoc(t, "docs/metrics.md")
	suffix := regexp.MustCompile(`_(bucket|sum|count)$`)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			names := regexp.MustCompile(`sluice_\w+`).FindAllString(tg.Expr, -1)
			assert.NotEmpty(t, names, "%s: %s", p.Title, tg.Expr)
			for _, n := range names {
				n = suffix.ReplaceAllString(n, "")
				if strings.HasPrefix(n, "sluice_policy") || strings.HasPrefix(n, "sluice_outcome") || strings.HasPrefix(n, "sluice_reason") ||
					strings.HasPrefix(n, "sluice_op") || strings.HasPrefix(n, "sluice_mode") {
					continue // a label, not a metric
				}
				assert.Contains(t, docs, "`"+n+"`", "%s: %s", p.Title, tg.Expr)
			}
		}
	}
}
