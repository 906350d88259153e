package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

func TestMain(m *testing.M) {
	cli.QuietRedisLog() // as main does: go-redis's own log would echo a huge address
	redistest.Main(m)
}

type result struct {
	code           int
	stdout, stderr string
}

func runArgs(args ...string) result {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

func TestHelpAndVersion(t *testing.T) {
	r := runArgs("--help")
	assert.Equal(t, cli.ExitOK, r.code)
	assert.Equal(t, usage, r.stdout)
	for _, c := range []string{"limits", "set", "unset", "inspect", "reset", "cooldown", "workers", "dashboard"} {
		assert.Contains(t, usage, "\n  "+c+" ", c)
		assert.Contains(t, commands, c)
	}
	r = runArgs("--version")
	assert.Equal(t, cli.ExitOK, r.code)
	assert.True(t, strings.HasPrefix(r.stdout, "sluice "), r.stdout)
}

func TestBadUsage(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	t.Setenv("SLUICE_REDIS", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no command: want limits, set, unset, inspect, reset, cooldown, workers or dashboard"},
		{[]string{"lmits"}, `unknown command "lmits": want limits, set, unset, inspect, reset, cooldown, workers or dashboard`},
		{[]string{"set"}, "set takes one argument or more, 'TYPE=SPEC'..."},
		{[]string{"cooldown", "k"}, "cooldown takes 2 arguments, KEY DURATION"},
		{[]string{"limits", "--colour"}, "flag provided but not defined: -colour"},
		{[]string{"limits"}, "no Redis: pass --redis or set SLUICE_REDIS or REDIS_URL"},
	} {
		r := runArgs(c.args...)
		assert.Equal(t, cli.ExitUsage, r.code, "%q", c.args)
		first, _, _ := strings.Cut(r.stderr, "\n")
		assert.Equal(t, "sluice: "+c.want, first, "%q", c.args)
	}
}

// The commands against a real Redis: flags before or after the arguments,
// a runtime limit set and shown, a bucket inspected, cooled down and reset,
// the workers' heartbeats listed.
func TestCommands(t *testing.T) {
	srv := redistest.Start(t)
	url := srv.URL()

	r := runArgs("set", "--redis", url, "http:request=fast")
	assert.Equal(t, cli.ExitUsage, r.code)
	assert.Contains(t, r.stderr, `sluice: limit "http:request=fast": `)

	r = runArgs("set", "sleep=5/s,burst=2", "--redis", url)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, `set sleep=5/s,burst=2 (runtime); but no live worker limits type "sleep"`, "no worker yet")

	// A worker's heartbeat, as cmd/worker writes it.
	ctl := control.New(srv.Client(t), "sluice:")
	require.NoError(t, ctl.Beat(context.Background(), control.Heartbeat{
		ID: "w1:42:1", Host: "w1", PID: 42, Mode: "shared", Seen: time.Now(), Waiting: 3, Processed: 7, Queues: []string{"default"},
		Limits: []control.LimitState{
			{Type: "sleep", Spec: "sleep=5/s,burst=2", Source: "runtime", Grants: 4.8, Waiting: 3},
			{Type: "http:request", Spec: "http:request=50/s,burst=5,key=tenant:{header.sluice-key}", Source: "flag", Grants: 40},
		},
	}))

	r = runArgs("--redis", url, "limits", "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var views []limitView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
	require.Len(t, views, 2)
	assert.Equal(t, "http:request", views[0].Type)
	assert.True(t, views[0].Keyed)
	assert.Equal(t, "flag", views[0].Source)
	assert.Equal(t, "sleep", views[1].Type)
	assert.Equal(t, "runtime", views[1].Source)
	assert.Equal(t, "cold", views[1].EffectiveWhy, "a token bucket adapts by default; its upstream has not answered yet")
	assert.InDelta(t, 5, views[1].Effective, 1e-9)
	assert.Equal(t, 1, views[1].Workers)
	assert.InDelta(t, 4.8, views[1].Grants, 0.01)
	assert.Equal(t, int64(3), views[1].Waiting)
	require.NotNil(t, views[1].Queued)
	assert.Equal(t, 0, *views[1].Queued, "an empty default queue")
	require.NotNil(t, views[1].Tokens)
	assert.Equal(t, 2, *views[1].Tokens, "a full bucket of burst 2")

	r = runArgs("--redis", url, "limits")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "TYPE")
	assert.Regexp(t, `sleep\s+token-bucket\s+sleep=5/s,burst=2\s+runtime \(`, r.stdout)

	r = runArgs("cooldown", "sleep", "30s", "--redis", url)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	r = runArgs("inspect", "sleep", "--redis", url, "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var st bucketState
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.InDelta(t, 30, st.Cooldown, 1)

	// A type with a key template has no one bucket: inspect TYPE gives its facts.
	r = runArgs("inspect", "http:request", "--redis", url)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "http:request: no bucket is known to bind: 40.0 grants/s")
	assert.Regexp(t, `per key tenant:\{header.sluice-key\}\s+50\s+50\s+-\s+-\s+the workers' --limit flag`, r.stdout)
	r = runArgs("inspect", "tenant:acme", "--type", "http:request", "--redis", url)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "tenant:acme: 5 left")

	r = runArgs("reset", "sleep", "--redis", url)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	r = runArgs("inspect", "sleep", "--redis", url, "--json")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.Zero(t, st.Cooldown, "reset clears the cooldown too")

	r = runArgs("workers", "--redis", url)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Regexp(t, `w1\s+42\s+shared\s+.*sleep=5/s,burst=2 \(runtime\)`, r.stdout)
	assert.Contains(t, r.stdout, "429 COOLDOWNS")

	r = runArgs("unset", "sleep", "--redis", url)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	r = runArgs("unset", "sleep", "--redis", url)
	assert.Equal(t, cli.ExitUsage, r.code)
	assert.Contains(t, r.stderr, `no runtime limit for type "sleep"`)
}

// A limit with global= keeps its own bucket as "{type}:type"
// (workers.BucketKey): cooldown, inspect and reset act on that bucket.
func TestCommandsGlobalBucket(t *testing.T) {
	srv := redistest.Start(t)
	r := runArgs("set", "email=5/s,burst=2,global=50/s", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	r = runArgs("cooldown", "email", "30s", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	lim := throttle.NewLimiter(throttle.NewRedisStore(srv.Client(t)))
	left, err := lim.CooldownLeft(context.Background(), workers.BucketKey(workers.Policy{Name: "email", Global: throttle.Limit{Rate: 50, Period: time.Second, Burst: 50}}, "email", ""))
	require.NoError(t, err)
	assert.Greater(t, left, 25*time.Second, "the pool's own bucket of the type is cooled down")
	r = runArgs("inspect", "email", "--redis", srv.URL(), "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var st bucketState
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.InDelta(t, 30, st.Cooldown, 5)
}
