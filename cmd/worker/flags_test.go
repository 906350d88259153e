package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

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
	assert.Contains(t, usage, "Examples:\n  worker --redis redis://")
	for _, name := range []string{"redis", "limiter-redis", "concurrency", "prefetch", "limit", "limits", "max-wait", "queues",
		"strict-priority", "horizon", "shutdown-timeout", "status-interval", "metrics-addr", "key-prefix",
		"failure-policy", "hosts", "http-timeout", "log-format", "log-level", "unlimited", "version"} {
		assert.Contains(t, usage, "\n  --"+name+" ", name)
	}
}

func TestParseFlagsDefaults(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://127.0.0.1:6379/3")
	c, err := parseFlags(nil)
	require.NoError(t, err)
	assert.Equal(t, "redis://127.0.0.1:6379/3", c.redisURL)
	assert.Equal(t, "redis://127.0.0.1:6379/3", c.limiterURL)
	assert.Equal(t, 10, c.concurrency)
	assert.Equal(t, 0, c.prefetch)
	assert.Empty(t, c.limits)
	assert.Empty(t, c.limitsFile)
	assert.Equal(t, 5*time.Second, c.maxWait)
	assert.Equal(t, map[string]int{"default": 1}, c.queues)
	assert.False(t, c.strictPriority)
	assert.Equal(t, 24*time.Hour, c.horizon)
	assert.Equal(t, 30*time.Second, c.shutdownTimeout)
	assert.Equal(t, 10*time.Second, c.statusInterval)
	assert.Empty(t, c.metricsAddr)
	assert.Equal(t, "sluice:", c.keyPrefix)
	assert.Equal(t, throttle.FailClosed, c.failure)
	assert.Equal(t, 0, c.hosts)
	assert.Equal(t, 30*time.Second, c.httpTimeout)
	assert.Equal(t, "text", c.logFormat)
	assert.Equal(t, slog.LevelInfo, c.logLevel)
	assert.Empty(t, c.warnings)
}

func TestParseFlags(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://ignored:6379")
	c, err := parseFlags([]string{
		"--redis", "redis://q:6379/0", "--limiter-redis", "rediss://l:6380/1",
		"--concurrency", "50", "--prefetch", "32", "--limit", "a=1/s", "--limit", "b=2/m", "--limits", "limits.json",
		"--max-wait", "2s", "--queues", " critical=6, default=3,low ", "--strict-priority",
		"--horizon", "1h", "--shutdown-timeout", "10s", "--status-interval", "0", "--metrics-addr", ":9090",
		"--key-prefix", "", "--failure-policy", "local", "--hosts", "8", "--http-timeout", "3s",
		"--log-format", "json", "--log-level", "WARN",
	})
	require.NoError(t, err)
	assert.Equal(t, "redis://q:6379/0", c.redisURL)
	assert.Equal(t, "rediss://l:6380/1", c.limiterURL)
	assert.Equal(t, 50, c.concurrency)
	assert.Equal(t, 32, c.prefetch)
	assert.Equal(t, []string{"a=1/s", "b=2/m"}, c.limits)
	assert.Equal(t, "limits.json", c.limitsFile)
	assert.Equal(t, 2*time.Second, c.maxWait)
	assert.Equal(t, map[string]int{"critical": 6, "default": 3, "low": 1}, c.queues)
	assert.True(t, c.strictPriority)
	assert.Equal(t, time.Hour, c.horizon)
	assert.Equal(t, 10*time.Second, c.shutdownTimeout)
	assert.Equal(t, time.Duration(0), c.statusInterval)
	assert.Equal(t, ":9090", c.metricsAddr)
	assert.Equal(t, "", c.keyPrefix)
	assert.Equal(t, throttle.FailLocal, c.failure)
	assert.Equal(t, 8, c.hosts)
	assert.Equal(t, 3*time.Second, c.httpTimeout)
	assert.Equal(t, "json", c.logFormat)
	assert.Equal(t, slog.LevelWarn, c.logLevel)
	assert.Empty(t, c.warnings)

	c, err = parseFlags([]string{"--redis", "redis://q", "--hosts", "3", "--failure-policy", "open"})
	require.NoError(t, err)
	assert.Equal(t, []string{"--hosts 3 is used only with --failure-policy local; ignored"}, c.warnings)

	c, err = parseFlags([]string{"--redis", "redis://q", "--hosts", "auto", "--failure-policy", "local"})
	require.NoError(t, err)
	assert.True(t, c.hostsAuto, "--hosts auto")
	assert.Equal(t, 0, c.hosts)
}

func TestParseQueues(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]int
		err  string
	}{
		{in: "default", want: map[string]int{"default": 1}},
		{in: "critical=6,default=3,low=1", want: map[string]int{"critical": 6, "default": 3, "low": 1}},
		{in: " a = 2 , b ", want: map[string]int{"a": 2, "b": 1}},
		{in: "", err: `no queue: want NAME[=PRIORITY],..., e.g. "default" or "critical=6,default=3,low=1"`},
		{in: "a,,b", err: `empty queue name in "" (a stray comma?)`},
		{in: "=3", err: `empty queue name in "=3" (a stray comma?)`},
		{in: "a,a=2", err: `queue "a" given twice`},
		{in: "a=0", err: `queue "a": priority "0" is not a whole number from 1 up`},
		{in: "a=x", err: `queue "a": priority "x" is not a whole number from 1 up`},
		{in: "a=", err: `queue "a": priority "" is not a whole number from 1 up`},
		{in: "my queue", err: `queue name "my queue" contains a space or control character`},
	}
	for i, tt := range tests {
		got, err := parseQueues(tt.in)
		if tt.err != "" {
			assert.EqualError(t, err, tt.err, "%d: %q", i, tt.in)
			continue
		}
		require.NoError(t, err, "%d: %q", i, tt.in)
		assert.Equal(t, tt.want, got, "%d: %q", i, tt.in)
	}
}

func TestParseHosts(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"api.example.com", []string{"api.example.com"}},
		{" a.example.com , 10.0.0.7 ,[::1]", []string{"a.example.com", "10.0.0.7", "::1"}},
		{"fe80::1", []string{"fe80::1"}},
	} {
		got, err := parseHosts(tt.in)
		require.NoError(t, err, "%q", tt.in)
		assert.Equal(t, tt.want, got, "%q", tt.in)
	}
	for _, bad := range []string{"api.example.com:443", "api.example.com/v1", "user@host", "a,,b"} {
		_, err := parseHosts(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// Bad usage and input are reported before any Redis call: the Redis given
// is not running, and the error is about the input, not about Redis.
func TestBadInput(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	dead, _ := deadURL(t)
	dir := t.TempDir()
	badJSON := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(badJSON, []byte(`{"limits": [{"type": "a", "rate": "5/s"},]}`), 0o600))
	badEntry := filepath.Join(dir, "entry.json")
	require.NoError(t, os.WriteFile(badEntry, []byte(`{"limits": [{"type": "a", "rate": "5/s", "key": "t:{nope}"}]}`), 0o600))
	with := func(args ...string) []string { return append([]string{"--redis", dead}, args...) }

	tests := []struct {
		args []string
		want string // the first line of stderr, after "worker: "
	}{
		{with("--colour", "blue"), "flag provided but not defined: -colour"},
		{with("extra"), `unexpected argument "extra" (every option is a --flag)`},
		{with("--concurrency", "0"), "--concurrency 0 must be at least 1"},
		{with("--prefetch", "-1"), "--prefetch -1 must be from 0 to 255"},
		{with("--prefetch", "256"), "--prefetch 256 must be from 0 to 255"},
		{with("--concurrency", "many"), `invalid value "many" for flag -concurrency: parse error`},
		{with("--max-wait", "0s"), "--max-wait 0s must be positive"},
		{with("--max-wait", "1000000h"), "--max-wait 1000000h0m0s is longer than 24h0m0s (a job would hold a worker slot that long)"},
		{with("--horizon", "-1h"), "--horizon -1h0m0s must be positive"},
		{with("--shutdown-timeout", "0s"), "--shutdown-timeout 0s must be positive"},
		{with("--http-timeout", "0s"), "--http-timeout 0s must be positive"},
		{with("--http-hosts", "https://api.example.com"), `--http-hosts "https://api.example.com": "https://api.example.com" is not a host name or address (no scheme, port or path)`},
		{with("--http-hosts", "a.example.com,,b"), `--http-hosts "a.example.com,,b": an empty host`},
		{with("--status-interval", "-1s"), "--status-interval -1s must not be negative (0 turns the status line off)"},
		{with("--queues", "a=0"), `--queues "a=0": queue "a": priority "0" is not a whole number from 1 up`},
		{with("--key-prefix", "{app}:"), `--key-prefix "{app}:" must not contain '{' or '}' (they would move keys between Redis Cluster slots)`},
		{with("--key-prefix", strings.Repeat("p", 129)), "--key-prefix is 129 bytes, longer than 128"},
		{with("--metrics-addr", "9090"), `--metrics-addr "9090" is not HOST:PORT, e.g. 127.0.0.1:9090`},
		{with("--failure-policy", "sideways"), `--failure-policy "sideways": want closed, open or local`},
		{with("--failure-policy", "local"), "--failure-policy local needs --hosts N (or auto), the number of worker processes in the fleet: " +
			"while the limiter Redis is down each process takes 1/N of every limit"},
		{with("--failure-policy", "local", "--hosts", "0"), `--hosts "0" must be a whole number of at least 1, or auto`},
		{with("--failure-policy", "local", "--hosts", "many"), `--hosts "many" must be a whole number of at least 1, or auto`},
		{with("--log-format", "xml"), `--log-format "xml": want text or json`},
		{with("--log-level", "loud"), `--log-level "loud": want debug, info, warn or error`},
		{with("--limits", ""), "--limits is empty: want the path of a JSON or YAML limits file"},
		{with("--limiter-redis", ""), "--limiter-redis is empty: leave it out to use the queue Redis"},

		{with("--limit", "http:request=50/q"), `limit "http:request=50/q": unknown unit "q" (want s, m, h, day, week or month)`},
		{with("--limit", "http:request"), `limit "http:request": want TYPE=RATE/UNIT, e.g. http:request=50/s`},
		{with("--limit", "a=5/s,cost=9,burst=3"), `limit "a=5/s,cost=9,burst=3": cost 9 is larger than burst 3: no job could ever run`},
		{with("--limit", "a=1/s", "--limit", "a=2/s"), `limits of type "a": two limits without name= (give each of the type's limits a name=)`},
		{with("--limit", "a=1/s,name=r,key={payload.t}", "--limit", "a=2/s,name=t,key={payload.t}"), `limits of type "a": key given on two of its limits (write it once)`},
		{with("--limit", "a=1/s,name=t,cost={payload.n"), `limit "a=1/s,name=t,cost={payload.n": limit "t": cost template "{payload.n": want one placeholder: {payload.<field>}, {header.<name>} or {body.<field>}`},
		{with("--limit", "a=5/s,key=tenant:{payload.tenant.id}"),
			`limit "a=5/s,key=tenant:{payload.tenant.id}": key template "tenant:{payload.tenant.id}": placeholder {payload.tenant.id}: only top-level payload fields are supported`},
		{with("--limit", "a=5/s,key=t:{foo}"),
			`limit "a=5/s,key=t:{foo}": key template "t:{foo}": unknown placeholder {foo}: want {type}, {payload.<field>} or {header.<name>}`},
		{with("--limit", strings.Repeat("t", 65)+"=5/s"),
			`limit "` + strings.Repeat("t", 65) + `=5/s": type is 65 bytes, more than 64: it names the policy in metrics and logs`},
		{with("--limit", "a{b}=5/s"), `limit "a{b}=5/s": type "a{b}" must not contain braces: it names the policy's buckets`},
		{with("--limits", filepath.Join(dir, "missing.json")), `limits file "` + filepath.Join(dir, "missing.json") + `": no such file or directory`},
		{with("--limits", badJSON), `limits file "` + badJSON + `": bad JSON at line 1, column 42: invalid character ']' looking for beginning of value`},
		{with("--limits", badEntry), `limits file "` + badEntry + `": limits[0] (type "a"): key template "t:{nope}": unknown placeholder {nope}: want {type}, {payload.<field>} or {header.<name>}`},

		{[]string{"--redis", "http://worker:hunter2@cache"}, `Redis URL http://worker:xxxxx@cache: scheme "http" is not redis, rediss, redis-cluster or redis-sentinel (want redis://HOST:PORT/DB)`},
		{with("--limiter-redis", "redis://worker:hunter2@cache/x"), `--limiter-redis: Redis URL redis://worker:xxxxx@cache/x: database "x" is not a number from 0 up (want /DB after the host, e.g. /0)`},
		{nil, "no Redis: pass --redis or set REDIS_URL"},

		{with(), "no limit for any job type, and no --unlimited: this worker would run nothing."},
		{with("--limit", "http:requests=5/s"), `limit "http:requests=5/s": this worker has no job type "http:requests" (it runs http:request and sleep)`},
		{with("--unlimited", "sleeep"), `--unlimited "sleeep": this worker has no job type "sleeep" (it runs http:request and sleep)`},
		{with("--unlimited", "sleep", "--limit", "sleep=5/s"), `--unlimited "sleep": the type also has a limit; give one or the other`},
		{with("--version=maybe"), `invalid boolean value "maybe" for -version: parse error`},
	}
	for i, tt := range tests {
		r := runArgs(context.Background(), tt.args...)
		assert.Equal(t, cli.ExitUsage, r.code, "%d: %q", i, tt.args)
		first, _, _ := strings.Cut(r.stderr, "\n")
		assert.Equal(t, "worker: "+tt.want, first, "%d: %q", i, tt.args)
		assert.NotContains(t, r.stderr, "hunter2", "%d", i)
		assert.NotContains(t, r.stderr, "level=", "%d: nothing is logged before the input is checked", i)
		assert.Empty(t, r.stdout, "%d", i)
	}
}

func TestVersion(t *testing.T) {
	r := runArgs(context.Background(), "--version")
	assert.Equal(t, cli.ExitOK, r.code)
	assert.True(t, strings.HasPrefix(r.stdout, "worker "), r.stdout)
	assert.Contains(t, r.stdout, " go1.")
	assert.Empty(t, r.stderr)
}

// Every flag may come from SLUICE_<FLAG>; a flag on the command line wins,
// and SLUICE_REDIS wins over REDIS_URL.
func TestFlagsFromEnv(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://from-redis-url")
	t.Setenv("SLUICE_REDIS", "redis://from-sluice-redis")
	t.Setenv("SLUICE_CONCURRENCY", "3")
	t.Setenv("SLUICE_LIMIT", "http:request=5/s;sleep=1/s")
	t.Setenv("SLUICE_STRICT_PRIORITY", "true")
	t.Setenv("SLUICE_MAX_WAIT", "2s")
	c, err := parseFlags([]string{"--max-wait", "7s"})
	require.NoError(t, err)
	assert.Equal(t, "redis://from-sluice-redis", c.redisURL)
	assert.Equal(t, "redis://from-sluice-redis", c.limiterURL)
	assert.Equal(t, 3, c.concurrency)
	assert.Equal(t, []string{"http:request=5/s", "sleep=1/s"}, c.limits)
	assert.True(t, c.strictPriority)
	assert.Equal(t, 7*time.Second, c.maxWait, "the flag wins")

	t.Setenv("SLUICE_CONCURRENCY", "many")
	r := runArgs(context.Background())
	assert.Equal(t, cli.ExitUsage, r.code)
	assert.True(t, strings.HasPrefix(r.stderr, `worker: SLUICE_CONCURRENCY="many": parse error`), r.stderr)
}
