package main

import (
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
)

// sluice set says which workers apply the limit, from their heartbeats: a
// type no worker limits (a typo, say) is named as such, not promised to
// "every worker".
func TestSetSaysWhoAppliesIt(t *testing.T) {
	srv := redistest.Start(t)
	r := runArgs("set", "slep=5/s", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "every worker applies it")
	assert.Contains(t, r.stdout, `set slep=5/s,burst=5 (runtime); but no live worker limits type "slep"`)

	ctl := control.New(srv.Client(t), "sluice:")
	for _, id := range []string{"w1:1:1", "w2:2:2"} {
		require.NoError(t, ctl.Beat(context.Background(), control.Heartbeat{ID: id, Host: "w", Seen: time.Now(),
			Limits: []control.LimitState{{Type: "sleep", Spec: "sleep=5/s,burst=5", Source: "flag"}}}))
	}
	r = runArgs("set", "sleep=6/s", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Equal(t, "set sleep=6/s,burst=6 (runtime); the 2 workers that limit sleep apply it within a second\n", r.stdout)
}

// sluice limits shows a runtime entry that does not parse, marked, with why.
func TestLimitsShowsMalformedEntries(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	require.NoError(t, rdb.HSet(context.Background(), "sluice:{ctl}:limits",
		"odd", `{"spec": "odd=fast", "by": "x@y"}`, "worse", "{nope").Err())
	r := runArgs("limits", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Regexp(t, `odd\s+malformed\s+odd=fast\s+runtime`, r.stdout)
	assert.Contains(t, r.stdout, `odd: the runtime limit is malformed and no worker applies it: limit "odd=fast": rate "fast" has no unit`)
	assert.Contains(t, r.stdout, `worse: the runtime limit is malformed and no worker applies it: not a JSON entry`)

	r = runArgs("limits", "--redis", srv.URL(), "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var views []limitView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
	require.Len(t, views, 2)
	assert.Equal(t, "odd", views[0].Type)
	assert.Contains(t, views[0].Malformed, `rate "fast" has no unit`)
	assert.Equal(t, "runtime", views[0].Source)
}

// Bad arguments are usage errors (exit 2) with the right message, found
// before Redis is reached.
func TestBadArguments(t *testing.T) {
	srv := redistest.Start(t)
	long := strings.Repeat("k", 600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", ""}, "KEY is empty"},
		{[]string{"inspect", "", "--type", "sleep"}, "KEY is empty"},
		{[]string{"reset", "", "--type", "sleep"}, "KEY is empty"},
		{[]string{"cooldown", "", "30s", "--type", "sleep"}, "KEY is empty"},
		{[]string{"inspect", long, "--type", "sleep"}, "KEY is 600 bytes, longer than 512"},
		{[]string{"reset", long, "--type", "sleep"}, "KEY is 600 bytes, longer than 512"},
		{[]string{"cooldown", long, "30s", "--type", "sleep"}, "KEY is 600 bytes, longer than 512"},
		{[]string{"cooldown", "sleep", "-5s"}, `cooldown sleep -5s: the duration must be positive, e.g. 30s`},
		{[]string{"cooldown", "sleep", "0s"}, `cooldown sleep 0s: the duration must be positive, e.g. 30s`},
		{[]string{"cooldown", "sleep", "100000000h"}, `cooldown sleep 100000000h: the duration is at most 720h (30 days)`},
		{[]string{"cooldown", "sleep", "1000h"}, `cooldown sleep 1000h: the duration is at most 720h (30 days)`},
		{[]string{"cooldown", "sleep", "soon"}, `cooldown sleep "soon": want a duration such as 30s or 5m`},
		{[]string{"set", "sleep=1/s,max-wait=1000000h"}, `max-wait 1000000h0m0s is longer than 24h0m0s`},
		{[]string{"set", "sleep=1/s", "--json"}, "--json is for limits, workers and inspect"},
		{[]string{"unset", "sleep", "--json"}, "--json is for limits, workers and inspect"},
		{[]string{"reset", "sleep", "--json"}, "--json is for limits, workers and inspect"},
		{[]string{"cooldown", "sleep", "5s", "--json"}, "--json is for limits, workers and inspect"},
		{[]string{"dashboard", "--json"}, "--json is for limits, workers and inspect"},
	} {
		r := runArgs(append(c.args, "--redis", srv.URL())...)
		assert.Equal(t, cli.ExitUsage, r.code, "%.40q: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.want, "%.40q", c.args)
	}
}

// No message echoes a 100 kB argument: they are cut to 80 bytes and "…".
func TestMessagesClipArguments(t *testing.T) {
	srv := redistest.Start(t)
	huge := strings.Repeat("x", 100_000)
	for _, args := range [][]string{
		{huge},
		{"limits", "--" + huge},
		{"limits", "--json=" + huge},
		{"set", huge},
		{"set", "sleep=" + huge},
		{"set", huge + "=1/s"},
		{"unset", huge},
		{"inspect", huge},
		{"inspect", "k", "--type", huge},
		{"reset", "k", "--type", huge},
		{"cooldown", "k", huge},
		{"cooldown", huge, "5s"},
		{"cooldown", "k", "5s", "--type", huge},
		{"limits", "--key-prefix", huge},
		{"dashboard", "--addr", huge},
		{"dashboard", "--tls-cert", huge, "--tls-key", huge},
	} {
		r := runArgs(append(args, "--redis", srv.URL())...)
		assert.NotEqual(t, cli.ExitOK, r.code, "%.40q", args)
		assert.Less(t, len(r.stderr), 1000, "%.40q: %.300s", args, r.stderr)
	}
	r := runArgs("limits", "--redis", "redis://"+huge)
	assert.Less(t, len(r.stderr), 1000, "%.300s", r.stderr)
}

// sluice set takes a type's named limits together, and sluice limits shows
// one row per named limit, each with its own bucket's tokens; a set that
// replaces them resets every one of the type's buckets.
func TestSetAndListNamedLimits(t *testing.T) {
	srv := redistest.Start(t)
	r := runArgs("set", "llm=3/m,name=requests", "llm=100/m,burst=90,name=tokens,cost={payload.tokens}", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "set llm=3/m,burst=1,name=requests llm=100/m,burst=90,name=tokens,cost={payload.tokens} (runtime)")

	r = runArgs("limits", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Regexp(t, `llm \(requests\)\s+token-bucket\s+llm=3/m,burst=1,name=requests\s+runtime`, r.stdout)
	assert.Regexp(t, `llm \(tokens\)\s+token-bucket\s+llm=100/m,burst=90,name=tokens,cost=\{payload.tokens\}\s+runtime \(\S+\)\s+-\s+90\s`, r.stdout)

	r = runArgs("limits", "--redis", srv.URL(), "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var views []limitView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
	require.Len(t, views, 2)
	assert.Equal(t, []string{"requests", "tokens"}, []string{views[0].Limit, views[1].Limit})
	assert.Equal(t, views[0].Specs, views[1].Specs, "each row carries the type's specs")
	require.NotNil(t, views[1].Tokens)
	assert.Equal(t, 90, *views[1].Tokens)

	// inspect, reset and cooldown take a named limit's bucket with --limit.
	r = runArgs("inspect", "llm", "--limit", "tokens", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "llm: 90 left")
	r = runArgs("cooldown", "llm", "30s", "--limit", "tokens", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	r = runArgs("inspect", "llm", "--redis", srv.URL(), "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"cooldown_s": 0`, "the first limit's bucket, without --limit")
	r = runArgs("inspect", "llm", "--limit", "tokens", "--redis", srv.URL(), "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.NotContains(t, r.stdout, `"cooldown_s": 0`, "the tokens bucket cools down")
	r = runArgs("inspect", "llm", "--limit", "daily", "--redis", srv.URL())
	assert.Equal(t, cli.ExitUsage, r.code)
	assert.Contains(t, r.stderr, `llm has no limit named "daily": it has requests, tokens`)

	r = runArgs("set", "llm=3/m", "other=1/s", "--redis", srv.URL())
	assert.Equal(t, cli.ExitUsage, r.code)
	assert.Contains(t, r.stderr, "set takes the limits of one type at a time, not 2")
	r = runArgs("set", "llm=3/m", "llm=4/m", "--redis", srv.URL())
	assert.Equal(t, cli.ExitUsage, r.code)
	assert.Contains(t, r.stderr, "two limits without name=")
}
