package main

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/sleepjob"
	"github.com/sluicehq/sluice/queue"
)

// The worker writes its history: a point per step with the handler runs,
// the limit and the queue's depth, the tenants' longest waits, and its
// version in its heartbeat.
func TestRunWritesHistory(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	prefix := redistest.Prefix(t)
	qc := queue.NewClient(asynq.NewClientFromRedisClient(rdb))
	const jobs = 20
	for i := range jobs {
		tenant := "a"
		if i%3 == 0 {
			tenant = "b"
		}
		_, err := qc.Enqueue(context.Background(), queue.Task{Type: sleepjob.TaskType, Payload: []byte(`{"ms": 1, "tenant": "` + tenant + `"}`)}, asynq.MaxRetry(0))
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{
			"--redis", srv.URL(), "--key-prefix", prefix, "--status-interval", "0", "--history-step", "1s",
			"--concurrency", "2", "--limit", "sleep=20/s,burst=1,key=tenant:{payload.tenant},global=10/s:1",
		}, io.Discard, &stderr)
	}()

	// 20 jobs at 10/s: two seconds, over three steps or four.
	sum := func() (grants, done float64, n int) {
		_, pts, err := history.Read(context.Background(), rdb, prefix, sleepjob.TaskType, time.Now())
		require.NoError(t, err)
		for _, p := range pts {
			grants += p.Grants
			done += p.Done
		}
		return grants, done, len(pts)
	}
	require.Eventually(t, func() bool {
		_, done, n := sum()
		return done == jobs && n >= 2
	}, 15*time.Second, 50*time.Millisecond, "the jobs in the worker's points: %s", &stderr)

	hb, err := control.New(rdb, prefix).Workers(context.Background())
	require.NoError(t, err)
	require.Len(t, hb, 1)
	assert.NotEmpty(t, hb[0].Version)
	assert.Equal(t, hb[0].Version, cli.Version(prog)[len(prog)+1:])

	cancel()
	select {
	case code := <-done:
		require.Equal(t, cli.ExitOK, code, "%s", &stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("the worker did not stop:\n%s", &stderr)
	}

	// Stopped, the worker wrote the step it was in: every run still counted once.
	step, pts, err := history.Read(context.Background(), rdb, prefix, sleepjob.TaskType, time.Now())
	require.NoError(t, err)
	assert.Equal(t, time.Second, step)
	var grants, finished float64
	for i, p := range pts {
		grants += p.Grants
		finished += p.Done
		assert.Equal(t, 1, p.Workers, "point %d", i)
		assert.Equal(t, 10.0, p.Limit, "point %d: the global bucket's, the limit on the type's rate over all keys", i)
		assert.Equal(t, 10.0, p.Effective, "point %d: the global bucket adapts (adapt=on by default), at its ceiling", i)
		assert.Zero(t, p.Refused+p.Archived+p.Cooldowns, "point %d", i)
		assert.Equal(t, p.At, p.At.Truncate(time.Second), "point %d: at a step's start", i)
		if i > 0 {
			assert.True(t, p.At.After(pts[i-1].At), "point %d: oldest first", i)
		}
	}
	assert.Equal(t, float64(jobs), grants)
	assert.Equal(t, float64(jobs), finished)
	assert.Greater(t, pts[0].Queued, 0.0, "two jobs at a time: the queue held the rest at the first step's end: %v", pts)

	waits, err := history.ReadWaits(context.Background(), rdb, prefix, sleepjob.TaskType, time.Now(), 5*time.Minute)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"tenant:a", "tenant:b"}, mapKeys(waits))
	assert.GreaterOrEqual(t, max(waits["tenant:a"], waits["tenant:b"]), 500*time.Millisecond, "20 jobs at 10/s: the last waited about 2 s")
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestHistoryStepFlag(t *testing.T) {
	cases := []struct {
		arg  string
		want time.Duration
		bad  bool
	}{
		{"", 30 * time.Second, false}, // the default
		{"off", 0, false},
		{"0", 0, false},
		{"0s", 0, false},
		{"1s", time.Second, false},
		{"10m", 10 * time.Minute, false},
		{"1500ms", 1500 * time.Millisecond, false},
		{"999ms", 0, true},
		{"11m", 0, true},
		{"-1s", 0, true},
		{"soon", 0, true},
	}
	for i, c := range cases {
		args := []string{"--redis", "redis://q"}
		if c.arg != "" {
			args = append(args, "--history-step", c.arg)
		}
		cfg, err := parseFlags(args)
		if c.bad {
			assert.True(t, errors.Is(err, cli.ErrUsage), "case %d %q: %v", i, c.arg, err)
			continue
		}
		require.NoError(t, err, "case %d %q", i, c.arg)
		assert.Equal(t, c.want, cfg.historyStep, "case %d %q", i, c.arg)
	}
	t.Setenv("SLUICE_HISTORY_STEP", "off")
	cfg, err := parseFlags([]string{"--redis", "redis://q"})
	require.NoError(t, err)
	assert.Zero(t, cfg.historyStep, "from the environment")
}

func TestStepStart(t *testing.T) {
	at := time.Date(2026, 11, 27, 14, 0, 7, 300e6, time.UTC)
	assert.Equal(t, time.Date(2026, 11, 27, 14, 0, 0, 0, time.UTC), stepStart(at, 30*time.Second).UTC())
	assert.Equal(t, time.Date(2026, 11, 27, 14, 0, 7, 0, time.UTC), stepStart(at, time.Second).UTC())
	// 7 s steps count from 1970, not from year 1 as time.Truncate does.
	got := stepStart(at, 7*time.Second)
	assert.Zero(t, got.UnixMilli()%7000)
	assert.False(t, got.After(at))
	assert.Less(t, at.Sub(got), 7*time.Second)
}
