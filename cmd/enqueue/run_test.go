package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
)

// result is what one run of the command did.
type result struct {
	code           int
	stdout, stderr string
}

func runArgs(ctx context.Context, args ...string) result {
	return runIn(ctx, "", args...)
}

// runIn runs the command with stdin as its standard input.
func runIn(ctx context.Context, stdin string, args ...string) result {
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, strings.NewReader(stdin), &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// deadURL returns the URL of a Redis that is not running, with a password
// that must never show.
func deadURL(t *testing.T) (url, addr string) {
	t.Helper()
	srv := redistest.Start(t)
	srv.Stop()
	return "redis://worker:hunter2@" + srv.Addr() + "/0", srv.Addr()
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "-help"} {
		r := runArgs(context.Background(), arg)
		assert.Equal(t, cli.ExitOK, r.code, arg)
		assert.Equal(t, usage, r.stdout, arg)
		assert.Empty(t, r.stderr, arg)
	}
	assert.Contains(t, usage, "Examples:\n  enqueue --redis redis://")
}

// Bad usage and input are reported before any Redis call: the Redis given
// is not running, and the error is about the input, not about Redis.
func TestBadInput(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	dead, _ := deadURL(t)
	base := []string{"--redis", dead, "--type", "email:send", "--payload", `{"to": "a@example.com"}`}
	with := func(args ...string) []string { return append(append([]string{}, base...), args...) }

	tests := []struct {
		args []string
		want string // the first line of stderr, after "enqueue: "
	}{
		{with("--colour", "blue"), "flag provided but not defined: -colour"},
		{with("--count", "many"), `invalid value "many" for flag -count: parse error`},
		{with("extra"), `unexpected argument "extra" (every option is a --flag)`},
		{[]string{"--redis", dead, "--payload", "{}"}, "--type is required, e.g. --type email:send"},
		{[]string{"--redis", dead, "--type", " ", "--payload", "{}"}, "--type is required, e.g. --type email:send"},
		{[]string{"--redis", dead, "--type", "a"}, "--payload is required: a JSON document, e.g. --payload '{}' (or --payloads FILE)"},
		{with("--payloads", "-"), "--payload and --payloads both given: one payload, or a file of them"},
		{[]string{"--redis", dead, "--type", "a", "--payloads", ""}, `--payloads is empty: want a file of JSON lines, or "-" for stdin`},
		{[]string{"--redis", dead, "--type", "a", "--payloads", "-"}, "--payloads stdin holds no payload"},
		{[]string{"--redis", dead, "--type", "a", "--payloads", "/nonexistent/p.ndjson"}, "--payloads /nonexistent/p.ndjson: no such file or directory"},
		{[]string{"--redis", dead, "--type", "sleep", "--payload", `{"ms": "soon"}`}, `--payload is not a valid sleep: "ms" is "soon", not a number`},
		{[]string{"--redis", dead, "--type", "sleep", "--payload", `{}`}, `--payload is not a valid sleep: payload has no "ms", as in {"ms": 100}`},
		{with("--unique", "500ms"), "--unique 500ms must be at least 1s (asynq keeps uniqueness in whole seconds)"},
		{with("--deadline", "tomorrow"), `--deadline "tomorrow": want an RFC 3339 time, e.g. 2026-12-01T09:00:00Z, or a duration from now, e.g. 2h`},
		{with("--deadline", "2001-01-01T00:00:00Z"), "--deadline 2001-01-01T00:00:00Z has passed"},
		{with("--deadline", "-1h"), "--deadline -1h0m0s must be in the future"},
		{with("--payload", "{to: a}"), "--payload is not valid JSON: invalid character 't' looking for beginning of object key string"},
		{with("--payload", ""), "--payload is not valid JSON: unexpected end of JSON input"},
		{with("--payload", `{"a": 1} {}`), "--payload is not valid JSON: invalid character '{' after top-level value"},
		{with("--count", "0"), "--count 0 is out of range [1, 10000000]"},
		{with("--count", "10000001"), "--count 10000001 is out of range [1, 10000000]"},
		{with("--count", "-5"), "--count -5 is out of range [1, 10000000]"},
		{with("--queue", ""), "--queue is empty"},
		{with("--queue", "mail:p1"), "--queue mail:p1 is named like a member of a queue's family (QUEUE:pN, QUEUE:pN:lK): name the queue and give --priority"},
		{with("--max-retry", "-1"), "--max-retry -1 must not be negative"},
		{with("--in", "-1s"), "--in -1s must not be negative"},
		{with("--in", "5"), `invalid value "5" for flag -in: parse error`},
		{with("--timeout", "0s"), "--timeout 0s must be positive"},
		{with("--cost", "-2"), "--cost -2 must not be negative"},
		{with("--priority", "0"), "--priority 0 is out of range: 1 (first) to 5 (last), default 3"},
		{with("--priority", "6"), "--priority 6 is out of range: 1 (first) to 5 (last), default 3"},
		{with("--envelopes"), "--envelopes is for the lines of --payloads"},
		{with("--cost", "2000000"), "cost 2000000 is out of range [0, 1048576]"},
		{with("--key", strings.Repeat("k", 300)), "key: 300 bytes, more than 256"},
		{with("--type", "a\tb"), "type: control character at byte 1"},
		{[]string{"--redis", dead, "--type", "http:request", "--payload", `{"url": "ftp://files.example.com/x"}`},
			`--payload is not a valid http:request: url ftp://files.example.com/x: scheme "ftp" is not http or https`},
		{[]string{"--redis", dead, "--type", "http:request", "--payload", `{"url": "https://h/", "verb": "GET"}`},
			`--payload is not a valid http:request: payload: unknown field "verb"`},
		{[]string{"--redis", "http://worker:hunter2@cache", "--type", "a", "--payload", "{}"},
			`Redis URL http://worker:xxxxx@cache: scheme "http" is not redis, rediss, redis-cluster or redis-sentinel (want redis://HOST:PORT/DB)`},
		{[]string{"--type", "a", "--payload", "{}"}, "no Redis: pass --redis or set REDIS_URL"},
	}
	for i, tt := range tests {
		r := runArgs(context.Background(), tt.args...)
		assert.Equal(t, cli.ExitUsage, r.code, "%d: %q", i, tt.args)
		first, _, _ := strings.Cut(r.stderr, "\n")
		assert.Equal(t, "enqueue: "+tt.want, first, "%d: %q", i, tt.args)
		assert.NotContains(t, r.stderr, "hunter2", "%d", i)
		assert.Empty(t, r.stdout, "%d", i)
	}
}

func TestUnreachableRedis(t *testing.T) {
	dead, addr := deadURL(t)
	start := time.Now()
	r := runArgs(context.Background(), "--redis", dead, "--type", "a", "--payload", "{}", "--count", "10")
	assert.Equal(t, cli.ExitFailure, r.code)
	assert.Equal(t, "enqueue: cannot reach Redis at "+addr+": connection refused\n", r.stderr)
	assert.Empty(t, r.stdout)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// A Redis that accepts the connection but never answers: the ping gives up
// after its timeout.
func TestSilentRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the ping timeout")
	}
	srv := redistest.Start(t)
	srv.Pause(t)
	defer srv.Resume(t)
	r := runArgs(context.Background(), "--redis", srv.URL(), "--type", "a", "--payload", "{}")
	assert.Equal(t, cli.ExitFailure, r.code)
	assert.Equal(t, "enqueue: cannot reach Redis at "+srv.Addr()+": no answer within 3s\n", r.stderr)
}

var summary = regexp.MustCompile(`^enqueued (\d+) tasks? of type (\S+) to queue (\S+) in \d+\.\d\ds \(\d+/s\)(, to run in \S+)?\n$`)

func TestEnqueue(t *testing.T) {
	srv := redistest.Start(t)
	before := time.Now()
	r := runArgs(context.Background(),
		"--redis", srv.URL(), "--type", "email:send", "--payload", `{"to": "a@example.com"}`,
		"--count", "500", "--queue", "mail", "--max-retry", "3", "--timeout", "1m", "--key", "tenant-7", "--cost", "2")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	m := summary.FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	assert.Equal(t, []string{"500", "email:send", "mail", ""}, m[1:])
	assert.NotContains(t, r.stderr, "enqueue:")

	insp := asynq.NewInspectorFromRedisClient(srv.Client(t))
	info, err := insp.GetQueueInfo("mail")
	require.NoError(t, err)
	assert.Equal(t, 500, info.Pending)
	assert.Equal(t, 500, info.Size)

	tasks, err := insp.ListPendingTasks("mail", asynq.PageSize(1000))
	require.NoError(t, err)
	require.Len(t, tasks, 500)
	ids := make(map[string]bool)
	for i, ti := range tasks {
		ids[ti.ID] = true
		assert.Equal(t, "email:send", ti.Type, "%d", i)
		assert.JSONEq(t, `{"to": "a@example.com"}`, string(ti.Payload), "%d", i)
		assert.Equal(t, 4, ti.MaxRetry, "%d: the job's 3 and queue.Client's spare", i)
		assert.Equal(t, "3", ti.Headers[queue.HeaderMaxRetry], "%d", i)
		assert.Equal(t, time.Minute, ti.Timeout, "%d", i)

		meta, err := queue.MetaOf(asynq.NewTaskWithHeaders(ti.Type, ti.Payload, ti.Headers))
		require.NoError(t, err, "%d", i)
		assert.Equal(t, "tenant-7", meta.Key, "%d", i)
		assert.Equal(t, 2, meta.Cost, "%d", i)
		assert.Equal(t, time.Minute, meta.Timeout, "%d", i)
		assert.WithinRange(t, meta.EnqueuedAt, before.Add(-time.Second), time.Now().Add(time.Second), "%d", i)
		assert.Contains(t, ti.Headers, queue.HeaderEnqueuedAt, "%d", i)
	}
	assert.Len(t, ids, 500, "every task is its own")
}

func TestEnqueueDefaults(t *testing.T) {
	srv := redistest.Start(t)
	t.Setenv("REDIS_URL", srv.URL())
	r := runArgs(context.Background(), "--type", "http:request", "--payload", `{"url": "https://example.com/hook", "method": "POST"}`)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	m := summary.FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	assert.Equal(t, []string{"1", "http:request", "default", ""}, m[1:])

	tasks, err := asynq.NewInspectorFromRedisClient(srv.Client(t)).ListPendingTasks("default")
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, 26, tasks[0].MaxRetry, "asynq's default of 25, and queue.Client's spare")
	assert.Equal(t, "25", tasks[0].Headers[queue.HeaderMaxRetry])
	assert.NotContains(t, tasks[0].Headers, queue.HeaderKey)
	assert.NotContains(t, tasks[0].Headers, queue.HeaderCost)
	assert.Contains(t, tasks[0].Headers, queue.HeaderEnqueuedAt)
}

func TestEnqueueIn(t *testing.T) {
	srv := redistest.Start(t)
	before := time.Now()
	r := runArgs(context.Background(), "--redis", srv.URL(), "--type", "report:build", "--payload", "{}", "--count", "20", "--in", "1h")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	m := summary.FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	assert.Equal(t, []string{"20", "report:build", "default", ", to run in 1h0m0s"}, m[1:])

	insp := asynq.NewInspectorFromRedisClient(srv.Client(t))
	info, err := insp.GetQueueInfo("default")
	require.NoError(t, err)
	assert.Equal(t, 0, info.Pending)
	assert.Equal(t, 20, info.Scheduled)
	tasks, err := insp.ListScheduledTasks("default")
	require.NoError(t, err)
	require.Len(t, tasks, 20)
	for i, ti := range tasks {
		assert.WithinRange(t, ti.NextProcessAt, before.Add(time.Hour-time.Second), time.Now().Add(time.Hour+time.Second), "%d", i)
	}
}

func TestProgress(t *testing.T) {
	old := progressEvery
	progressEvery = time.Millisecond
	defer func() { progressEvery = old }()

	srv := redistest.Start(t)
	r := runArgs(context.Background(), "--redis", srv.URL(), "--type", "a", "--payload", "{}", "--count", "3000")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	require.NotEmpty(t, lines)
	line := regexp.MustCompile(`^enqueued (\d+)/3000 \((\d+)%\) \d+/s$`)
	last := -1
	for _, l := range lines {
		m := line.FindStringSubmatch(l)
		require.NotNil(t, m, "progress line %q", l)
		n, _ := strconv.Atoi(m[1])
		pct, _ := strconv.Atoi(m[2])
		assert.GreaterOrEqual(t, n, last, "progress goes forward")
		assert.Equal(t, n*100/3000, pct)
		last = n
	}
}

func TestQuiet(t *testing.T) {
	old := progressEvery
	progressEvery = time.Millisecond
	defer func() { progressEvery = old }()

	srv := redistest.Start(t)
	r := runArgs(context.Background(), "--redis", srv.URL(), "--type", "a", "--payload", "{}", "--count", "1000", "--quiet")
	assert.Equal(t, result{code: cli.ExitOK}, r)
	info, err := asynq.NewInspectorFromRedisClient(srv.Client(t)).GetQueueInfo("default")
	require.NoError(t, err)
	assert.Equal(t, 1000, info.Pending)
}

// An interrupted run stops early, says how many tasks it enqueued, and that
// count is exact.
func TestInterrupt(t *testing.T) {
	srv := redistest.Start(t)
	insp := asynq.NewInspectorFromRedisClient(srv.Client(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	results := make(chan result, 1)
	go func() {
		results <- runArgs(ctx, "--redis", srv.URL(), "--type", "a", "--payload", "{}", "--count", "10000000", "--queue", "big")
	}()
	require.Eventually(t, func() bool {
		info, err := insp.GetQueueInfo("big")
		return err == nil && info.Pending >= 200
	}, 10*time.Second, 5*time.Millisecond)
	cancel()
	r := <-results

	assert.Equal(t, cli.ExitInterrupted, r.code)
	m := summary.FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	assert.Equal(t, "enqueue: interrupted after "+m[1]+" of 10000000 tasks\n", r.stderr)

	info, err := insp.GetQueueInfo("big")
	require.NoError(t, err)
	assert.Equal(t, n, info.Pending, "the count printed is the count enqueued")
	assert.Less(t, n, 10000000)
}

func TestInterruptBeforeStart(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := runArgs(ctx, "--redis", srv.URL(), "--type", "a", "--payload", "{}")
	assert.Equal(t, cli.ExitInterrupted, r.code)
	assert.Equal(t, "enqueue: interrupted before enqueuing anything\n", r.stderr)
	assert.Empty(t, r.stdout)
}

// Redis going away part way is a runtime failure that says how far it got.
func TestRedisGoesAway(t *testing.T) {
	srv := redistest.Start(t)
	insp := asynq.NewInspectorFromRedisClient(srv.Client(t))

	results := make(chan result, 1)
	go func() {
		results <- runArgs(context.Background(), "--redis", srv.URL(), "--type", "a", "--payload", "{}", "--count", "10000000")
	}()
	require.Eventually(t, func() bool {
		info, err := insp.GetQueueInfo("default")
		return err == nil && info.Pending >= 100
	}, 10*time.Second, 5*time.Millisecond)
	srv.Kill(t)
	r := <-results

	assert.Equal(t, cli.ExitFailure, r.code)
	m := summary.FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	assert.Contains(t, r.stderr, "enqueue: stopped after "+m[1]+" of 10000000 tasks: queue: enqueue a: ")
}

func TestVersion(t *testing.T) {
	r := runArgs(context.Background(), "--version")
	assert.Equal(t, cli.ExitOK, r.code)
	assert.True(t, strings.HasPrefix(r.stdout, "enqueue "), r.stdout)
	assert.Empty(t, r.stderr)
}

// --payloads reads NDJSON from a file or stdin: each payload --count times,
// in order, every line checked before anything is sent.
func TestEnqueuePayloads(t *testing.T) {
	srv := redistest.Start(t)
	insp := asynq.NewInspectorFromRedisClient(srv.Client(t))
	lines := `{"ms": 1, "tenant": "a"}

{"ms": 2, "tenant": "b"}
{"ms": 3, "tenant": "c"}
`
	r := runIn(context.Background(), lines, "--redis", srv.URL(), "--type", "sleep", "--payloads", "-", "--count", "2", "--queue", "s")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "enqueued 6 tasks of type sleep (3 payloads) to queue s")
	tasks, err := insp.ListPendingTasks("s", asynq.PageSize(100))
	require.NoError(t, err)
	seen := make(map[string]int)
	for _, ti := range tasks {
		seen[string(ti.Payload)]++
	}
	assert.Equal(t, map[string]int{`{"ms": 1, "tenant": "a"}`: 2, `{"ms": 2, "tenant": "b"}`: 2, `{"ms": 3, "tenant": "c"}`: 2}, seen)

	// One bad line: nothing is sent, and the line is named.
	path := filepath.Join(t.TempDir(), "p.ndjson")
	require.NoError(t, os.WriteFile(path, []byte(`{"url": "https://a.example/"}`+"\n"+`{"url": "ftp://b.example/"}`+"\n"), 0o600))
	r = runArgs(context.Background(), "--redis", srv.URL(), "--type", "http:request", "--payloads", path, "--queue", "h")
	assert.Equal(t, cli.ExitUsage, r.code)
	assert.Equal(t, "enqueue: --payloads "+path+` line 2: payload is not a valid http:request: url ftp://b.example/: scheme "ftp" is not http or https`,
		strings.Split(r.stderr, "\n")[0])
	info, err := insp.GetQueueInfo("h")
	if err == nil {
		assert.Zero(t, info.Size, "nothing enqueued")
	}
}

// --unique maps to asynq's Unique: copies within the window are counted as
// duplicates, not errors; --deadline to asynq's Deadline.
func TestEnqueueUniqueAndDeadline(t *testing.T) {
	srv := redistest.Start(t)
	due := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	r := runArgs(context.Background(), "--redis", srv.URL(), "--type", "report:build", "--payload", `{"day": 1}`,
		"--count", "5", "--unique", "1m", "--deadline", due.Format(time.RFC3339))
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "enqueued 1 task of type report:build to queue default")
	assert.Contains(t, r.stdout, "; 4 duplicates skipped (--unique)")
	tasks, err := asynq.NewInspectorFromRedisClient(srv.Client(t)).ListPendingTasks("default")
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.True(t, tasks[0].Deadline.Equal(due), "deadline %v, want %v", tasks[0].Deadline, due)

	// The same again within the minute: all duplicates, still a success.
	r = runArgs(context.Background(), "--redis", srv.URL(), "--type", "report:build", "--payload", `{"day": 1}`, "--unique", "1m")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "enqueued 0 tasks of type report:build to queue default")
	assert.Contains(t, r.stdout, "; 1 duplicates skipped (--unique)")
}
