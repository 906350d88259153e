package cli

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

func TestRedisFromURL(t *testing.T) {
	tests := []struct {
		url                      string
		addr, user, password     string
		db                       int
		tls                      bool
		dialTimeout, readTimeout time.Duration
	}{
		{url: "redis://127.0.0.1:6390", addr: "127.0.0.1:6390"},
		{url: "redis://127.0.0.1:6390/0", addr: "127.0.0.1:6390"},
		{url: "redis://127.0.0.1:6390/", addr: "127.0.0.1:6390"},
		{url: "redis://cache.internal", addr: "cache.internal:6379"},
		{url: "redis://cache.internal/7", addr: "cache.internal:6379", db: 7},
		{url: "redis://:s3cret@cache:6380/2", addr: "cache:6380", password: "s3cret", db: 2},
		{url: "redis://worker:s3cret@cache:6380/15", addr: "cache:6380", user: "worker", password: "s3cret", db: 15},
		{url: "redis://worker:p%40ss%3Aword@cache", addr: "cache:6379", user: "worker", password: "p@ss:word"},
		{url: "redis://alice@cache", addr: "cache:6379", user: "alice"},
		{url: "rediss://worker:s3cret@redis.example.com:6380/1", addr: "redis.example.com:6380", user: "worker", password: "s3cret", db: 1, tls: true},
		{url: "REDISS://redis.example.com", addr: "redis.example.com:6379", tls: true},
		{url: "redis://[::1]:7000/3", addr: "[::1]:7000", db: 3},
		{url: "redis://cache?dial_timeout=2s&read_timeout=500ms", addr: "cache:6379", dialTimeout: 2 * time.Second, readTimeout: 500 * time.Millisecond},
		{url: "redis://cache?db=4", addr: "cache:6379", db: 4},
	}
	for i, tt := range tests {
		opt, aopt, err := RedisFromURL(tt.url)
		require.NoError(t, err, "%d: %s", i, tt.url)

		assert.Equal(t, "tcp", opt.Network, "%d", i)
		assert.Equal(t, tt.addr, opt.Addr, "%d", i)
		assert.Equal(t, tt.user, opt.Username, "%d", i)
		assert.Equal(t, tt.password, opt.Password, "%d", i)
		assert.Equal(t, tt.db, opt.DB, "%d", i)
		assert.True(t, opt.ContextTimeoutEnabled, "%d", i)
		assert.Equal(t, tt.dialTimeout, opt.DialTimeout, "%d", i)
		assert.Equal(t, tt.readTimeout, opt.ReadTimeout, "%d", i)

		want := asynq.RedisClientOpt{
			Network: "tcp", Addr: tt.addr, Username: tt.user, Password: tt.password, DB: tt.db,
			DialTimeout: tt.dialTimeout, ReadTimeout: tt.readTimeout, TLSConfig: aopt.TLSConfig,
		}
		assert.Equal(t, want, aopt, "%d", i)

		if !tt.tls {
			assert.Nil(t, opt.TLSConfig, "%d", i)
			assert.Nil(t, aopt.TLSConfig, "%d", i)
			continue
		}
		require.NotNil(t, opt.TLSConfig, "%d", i)
		require.NotNil(t, aopt.TLSConfig, "%d", i)
		host := strings.Split(tt.addr, ":")[0]
		for _, c := range []*tls.Config{opt.TLSConfig, aopt.TLSConfig} {
			assert.Equal(t, host, c.ServerName, "%d", i)
			assert.Equal(t, uint16(tls.VersionTLS12), c.MinVersion, "%d", i)
			assert.False(t, c.InsecureSkipVerify, "%d", i)
		}
		assert.NotSame(t, opt.TLSConfig, aopt.TLSConfig, "%d: the two clients must not share a tls.Config", i)
	}
}

func TestRedisFromURLInvalid(t *testing.T) {
	tests := []struct {
		url, want string
	}{
		{"", "no Redis: pass --redis or set REDIS_URL"},
		{"  ", "no Redis: pass --redis or set REDIS_URL"},
		{"http://cache:6379", `Redis URL http://cache:6379: scheme "http" is not redis or rediss (want redis://HOST:PORT/DB)`},
		{"unix:///run/redis.sock", `Redis URL unix:///run/redis.sock: scheme "unix" is not redis or rediss (want redis://HOST:PORT/DB)`},
		{"localhost:6379", `Redis URL localhost:6379: scheme "localhost" is not redis or rediss (want redis://HOST:PORT/DB)`},
		{"127.0.0.1:6379", `Redis URL 127.0.0.1:6379: first path segment in URL cannot contain colon (want redis://HOST:PORT/DB)`},
		{"redis:cache", `Redis URL redis:cache: want redis://HOST:PORT/DB`},
		{"redis://", `Redis URL redis://: no host (want redis://HOST:PORT/DB)`},
		{"redis://:6379/0", `Redis URL redis://:6379/0: no host (want redis://HOST:PORT/DB)`},
		{"redis://cache:0", `Redis URL redis://cache:0: port 0 is not from 1 to 65535`},
		{"redis://cache:65536", `Redis URL redis://cache:65536: port 65536 is not from 1 to 65535`},
		{"redis://cache:port", `Redis URL redis://cache:port: invalid port ":port" after host (want redis://HOST:PORT/DB)`},
		{"redis://cache/x", `Redis URL redis://cache/x: database "x" is not a number from 0 up (want /DB after the host, e.g. /0)`},
		{"redis://cache/-1", `Redis URL redis://cache/-1: database "-1" is not a number from 0 up (want /DB after the host, e.g. /0)`},
		{"redis://cache/+1", `Redis URL redis://cache/+1: database "+1" is not a number from 0 up (want /DB after the host, e.g. /0)`},
		{"redis://cache/1/2", `Redis URL redis://cache/1/2: database "1/2" is not a number from 0 up (want /DB after the host, e.g. /0)`},
		{"redis://cache/99999999999999999999", `Redis URL redis://cache/99999999999999999999: database "99999999999999999999" is not a number from 0 up (want /DB after the host, e.g. /0)`},
		{"redis://cache/1?db=2", `Redis URL redis://cache/1?db=2: database given twice, as /1 and ?db=2`},
		{"redis://cache?db=-3", `Redis URL redis://cache?db=-3: database -3 is not a number from 0 up`},
		{"redis://cache?colour=blue", `Redis URL redis://cache?colour=blue: unexpected option: colour`},
		{"redis://cache?dial_timeout=soon", `Redis URL redis://cache?dial_timeout=soon: invalid dial_timeout duration: time: invalid duration "soon"`},
		// The password never shows.
		{"redis://worker:hunter2@cache/x", `Redis URL redis://worker:xxxxx@cache/x: database "x" is not a number from 0 up (want /DB after the host, e.g. /0)`},
		{"http://worker:hunter2@cache", `Redis URL http://worker:xxxxx@cache: scheme "http" is not redis or rediss (want redis://HOST:PORT/DB)`},
		{"redis://worker:hun%zzter2@cache", `Redis URL redis://worker:xxxxx@cache: not a valid URL (want redis://USER:PASSWORD@HOST:PORT/DB, with special characters in the password percent-encoded)`},
		{"redis://worker:hunter2@cache:bad", `Redis URL redis://worker:xxxxx@cache:bad: not a valid URL (want redis://USER:PASSWORD@HOST:PORT/DB, with special characters in the password percent-encoded)`},
	}
	for i, tt := range tests {
		opt, aopt, err := RedisFromURL(tt.url)
		require.Error(t, err, "%d: %s", i, tt.url)
		assert.Equal(t, tt.want, err.Error(), "%d: %s", i, tt.url)
		assert.ErrorIs(t, err, ErrUsage, "%d", i)
		assert.Equal(t, ExitUsage, ExitCode(err), "%d", i)
		assert.NotContains(t, err.Error(), "hun", "%d", i)
		assert.Nil(t, opt, "%d", i)
		assert.Equal(t, asynq.RedisClientOpt{}, aopt, "%d", i)
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://:pw@h:1/2", "redis://:xxxxx@h:1/2"},
		{"rediss://user:pw@h/3?dial_timeout=1s", "rediss://user:xxxxx@h/3?dial_timeout=1s"},
		{"redis://user@h", "redis://user@h"},
		{"redis://user:p@ss@h/0", "redis://user:xxxxx@h/0"},
		{"redis://u:%zz@h", "redis://u:xxxxx@h"},
		{"redis://h/path@x", "redis://h/path@x"},
		{"not a url", "not a url"},
		{"", ""},
	}
	for i, tt := range tests {
		assert.Equal(t, tt.want, Redact(tt.in), "%d: %s", i, tt.in)
	}
}

func TestPing(t *testing.T) {
	srv := redistest.Start(t)
	opt, _, err := RedisFromURL(srv.URL())
	require.NoError(t, err)
	require.NoError(t, Ping(context.Background(), opt))

	// Ping closes its client; the caller's options are left alone.
	assert.Equal(t, 0, opt.MaxRetries)
}

func TestPingPassword(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "hunter2")

	opt, _, err := RedisFromURL("redis://:hunter2@" + srv.Addr() + "/0")
	require.NoError(t, err)
	require.NoError(t, Ping(context.Background(), opt))

	opt, _, err = RedisFromURL("redis://:wrong-hunter3@" + srv.Addr() + "/0")
	require.NoError(t, err)
	err = Ping(context.Background(), opt)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "cannot use Redis at "+srv.Addr()+": WRONGPASS"), err.Error())
	assert.NotContains(t, err.Error(), "hunter")
	assert.Equal(t, ExitFailure, ExitCode(err))
}

func TestPingDatabaseOutOfRange(t *testing.T) {
	srv := redistest.Start(t)
	opt, _, err := RedisFromURL("redis://" + srv.Addr() + "/99")
	require.NoError(t, err)
	err = Ping(context.Background(), opt)
	require.Error(t, err)
	assert.Equal(t, "cannot use Redis at "+srv.Addr()+": ERR DB index is out of range", err.Error())
}

func TestPingUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	opt, _, err := RedisFromURL("redis://worker:hunter2@" + srv.Addr() + "/0")
	require.NoError(t, err)

	err = Ping(context.Background(), opt)
	require.Error(t, err)
	assert.Equal(t, "cannot reach Redis at "+srv.Addr()+": connection refused", err.Error())
	assert.Equal(t, ExitFailure, ExitCode(err))
}

func TestPingTimeout(t *testing.T) {
	srv := redistest.Start(t)
	opt, _, err := RedisFromURL(srv.URL())
	require.NoError(t, err)
	srv.Pause(t)
	defer srv.Resume(t)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = Ping(ctx, opt)
	require.Error(t, err)
	assert.Equal(t, "cannot reach Redis at "+srv.Addr()+": no answer within 200ms", err.Error())
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestPingCanceled(t *testing.T) {
	srv := redistest.Start(t)
	opt, _, err := RedisFromURL(srv.URL())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = Ping(ctx, opt)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestPingBadHost(t *testing.T) {
	err := Ping(context.Background(), &redis.Options{Addr: "no-such-host.invalid:6379"})
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "cannot reach Redis at no-such-host.invalid:6379: lookup no-such-host.invalid"), err.Error())
}
