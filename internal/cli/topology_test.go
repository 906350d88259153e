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

func TestParseRedisCluster(t *testing.T) {
	tests := []struct {
		url            string
		addrs          []string
		user, password string
		tls            bool
		dialTimeout    time.Duration
		maxRedirects   int
	}{
		{url: "redis-cluster://10.0.0.1:7000", addrs: []string{"10.0.0.1:7000"}},
		{url: "redis-cluster://a:7000,b:7001,c", addrs: []string{"a:7000", "b:7001", "c:6379"}},
		{url: "redis-cluster://a:7000, b:7001/", addrs: []string{"a:7000", "b:7001"}},
		{url: "redis-cluster://a/0", addrs: []string{"a:6379"}},
		{url: "redis-cluster://[::1]:7000,[::1]", addrs: []string{"[::1]:7000", "[::1]:6379"}},
		{url: "redis-cluster://worker:p%40ss@a:7000,b:7001", addrs: []string{"a:7000", "b:7001"}, user: "worker", password: "p@ss"},
		{url: "redis-cluster://:s3cret@a", addrs: []string{"a:6379"}, password: "s3cret"},
		{url: "rediss-cluster://a:7000,b:7001", addrs: []string{"a:7000", "b:7001"}, tls: true},
		{url: "REDIS-CLUSTER://a?dial_timeout=2s&max_redirects=5", addrs: []string{"a:6379"}, dialTimeout: 2 * time.Second, maxRedirects: 5},
	}
	for i, tt := range tests {
		r, err := ParseRedis(tt.url)
		require.NoError(t, err, "%d: %s", i, tt.url)
		require.NotNil(t, r.cluster, "%d", i)
		o := r.cluster
		assert.Equal(t, tt.addrs, o.Addrs, "%d", i)
		assert.Equal(t, tt.user, o.Username, "%d", i)
		assert.Equal(t, tt.password, o.Password, "%d", i)
		assert.Equal(t, tt.dialTimeout, o.DialTimeout, "%d", i)
		assert.Equal(t, tt.maxRedirects, o.MaxRedirects, "%d", i)
		assert.True(t, o.ContextTimeoutEnabled, "%d", i)
		assert.Equal(t, "Redis Cluster "+strings.Join(tt.addrs, ","), r.Addr(), "%d", i)
		assert.Equal(t, tt.url, r.URL(), "%d", i)

		aopt, ok := r.Asynq().(asynq.RedisClusterClientOpt)
		require.True(t, ok, "%d: %T", i, r.Asynq())
		assert.Equal(t, tt.addrs, aopt.Addrs, "%d", i)
		assert.Equal(t, tt.user, aopt.Username, "%d", i)
		assert.Equal(t, tt.password, aopt.Password, "%d", i)
		assert.Equal(t, tt.dialTimeout, aopt.DialTimeout, "%d", i)
		assert.Equal(t, tt.maxRedirects, aopt.MaxRedirects, "%d", i)
		checkTLS(t, i, tt.tls, o.TLSConfig, aopt.TLSConfig)
	}
}

func TestParseRedisSentinel(t *testing.T) {
	tests := []struct {
		url            string
		master         string
		addrs          []string
		user, password string
		db             int
		tls            bool
		readTimeout    time.Duration
	}{
		{url: "redis-sentinel://s1?master=jobs", master: "jobs", addrs: []string{"s1:26379"}},
		{url: "redis-sentinel://s1:5000,s2,s3:5002/3?master=jobs", master: "jobs", addrs: []string{"s1:5000", "s2:26379", "s3:5002"}, db: 3},
		{url: "redis-sentinel://s1?master=jobs&db=4", master: "jobs", addrs: []string{"s1:26379"}, db: 4},
		{url: "redis-sentinel://worker:s3cret@s1,s2/1?master=jobs&read_timeout=1s", master: "jobs",
			addrs: []string{"s1:26379", "s2:26379"}, user: "worker", password: "s3cret", db: 1, readTimeout: time.Second},
		{url: "rediss-sentinel://s1,s2?master=jobs", master: "jobs", addrs: []string{"s1:26379", "s2:26379"}, tls: true},
	}
	for i, tt := range tests {
		r, err := ParseRedis(tt.url)
		require.NoError(t, err, "%d: %s", i, tt.url)
		require.NotNil(t, r.failover, "%d", i)
		o := r.failover
		assert.Equal(t, tt.master, o.MasterName, "%d", i)
		assert.Equal(t, tt.addrs, o.SentinelAddrs, "%d", i)
		assert.Equal(t, tt.user, o.Username, "%d", i)
		assert.Equal(t, tt.password, o.Password, "%d", i)
		assert.Empty(t, o.SentinelUsername+o.SentinelPassword, "%d: the credentials are the master's", i)
		assert.Equal(t, tt.db, o.DB, "%d", i)
		assert.Equal(t, tt.readTimeout, o.ReadTimeout, "%d", i)
		assert.True(t, o.ContextTimeoutEnabled, "%d", i)
		assert.Equal(t, "master "+tt.master+" of Sentinel "+strings.Join(tt.addrs, ","), r.Addr(), "%d", i)

		aopt, ok := r.Asynq().(asynq.RedisFailoverClientOpt)
		require.True(t, ok, "%d: %T", i, r.Asynq())
		assert.Equal(t, tt.master, aopt.MasterName, "%d", i)
		assert.Equal(t, tt.addrs, aopt.SentinelAddrs, "%d", i)
		assert.Equal(t, tt.user, aopt.Username, "%d", i)
		assert.Equal(t, tt.password, aopt.Password, "%d", i)
		assert.Equal(t, tt.db, aopt.DB, "%d", i)
		assert.Equal(t, tt.readTimeout, aopt.ReadTimeout, "%d", i)
		checkTLS(t, i, tt.tls, o.TLSConfig, aopt.TLSConfig)
	}
}

// checkTLS checks the TLS configs of a multi-host URL: none, or one each
// (not shared) that verifies every node under its own name.
func checkTLS(t *testing.T, i int, want bool, configs ...*tls.Config) {
	t.Helper()
	for _, c := range configs {
		if !want {
			assert.Nil(t, c, "%d", i)
			continue
		}
		require.NotNil(t, c, "%d", i)
		assert.Empty(t, c.ServerName, "%d: each node is verified under its own host name", i)
		assert.Equal(t, uint16(tls.VersionTLS12), c.MinVersion, "%d", i)
		assert.False(t, c.InsecureSkipVerify, "%d", i)
	}
	if want {
		assert.NotSame(t, configs[0], configs[1], "%d: the two clients must not share a tls.Config", i)
	}
}

// ParseRedis reads redis:// as RedisFromURL does.
func TestParseRedisOneServer(t *testing.T) {
	r, err := ParseRedis("rediss://worker:s3cret@cache:6380/2?dial_timeout=2s")
	require.NoError(t, err)
	opt, aopt, err := RedisFromURL("rediss://worker:s3cret@cache:6380/2?dial_timeout=2s")
	require.NoError(t, err)
	assert.Equal(t, opt.Addr, r.single.Addr)
	assert.Equal(t, opt.DB, r.single.DB)
	assert.Equal(t, "cache:6380", r.Addr())
	got, ok := r.Asynq().(asynq.RedisClientOpt)
	require.True(t, ok)
	aopt.TLSConfig, got.TLSConfig = nil, nil
	assert.Equal(t, aopt, got)
}

func TestParseRedisInvalid(t *testing.T) {
	tests := []struct{ url, want string }{
		{"", "no Redis: pass --redis or set REDIS_URL"},
		{"http://cache", `Redis URL http://cache: scheme "http" is not redis, rediss, redis-cluster or redis-sentinel (want redis://HOST:PORT/DB)`},
		{"redis-clusters://a", `Redis URL redis-clusters://a: scheme "redis-clusters" is not redis, rediss, redis-cluster or redis-sentinel (want redis://HOST:PORT/DB)`},
		{"redis://cache/x", `Redis URL redis://cache/x: database "x" is not a number from 0 up (want /DB after the host, e.g. /0)`},
		{"redis-cluster://", `Redis URL redis-cluster://: empty host in the list "" (want HOST:PORT,HOST:PORT)`},
		{"redis-cluster://a,,b", `Redis URL redis-cluster://a,,b: empty host in the list "a,,b" (want HOST:PORT,HOST:PORT)`},
		{"redis-cluster://a:0", `Redis URL redis-cluster://a:0: port 0 is not from 1 to 65535`},
		{"redis-cluster://a:x", `Redis URL redis-cluster://a:x: port x is not from 1 to 65535`},
		{"redis-cluster://:7000", `Redis URL redis-cluster://:7000: no host in ":7000"`},
		{"redis-cluster://a:1:2", `Redis URL redis-cluster://a:1:2: host "a:1:2": too many colons in address`},
		{"redis-cluster://a/1", `Redis URL redis-cluster://a/1: a Redis Cluster has database 0 only`},
		{"redis-cluster://a?db=2", `Redis URL redis-cluster://a?db=2: a Redis Cluster has database 0 only`},
		{"redis-cluster://a/x", `Redis URL redis-cluster://a/x: database "x" is not a number from 0 up (want /DB after the hosts, e.g. /0)`},
		{"redis-cluster://a?colour=blue", `Redis URL redis-cluster://a?colour=blue: unexpected option: colour`},
		{"redis-cluster://a?addr=b:1", `Redis URL redis-cluster://a?addr=b:1: option addr is not allowed here: hosts go before the path, separated by commas; credentials before the @; the sentinel's master in master=NAME`},
		{"redis-cluster://a#top", `Redis URL redis-cluster://a#top: unexpected fragment`},
		{"redis-sentinel://s1", `Redis URL redis-sentinel://s1: no master name (want ?master=NAME, the name the sentinels monitor)`},
		{"redis-sentinel://s1/2?master=m&db=3", `Redis URL redis-sentinel://s1/2?master=m&db=3: database given twice, as /2 and ?db=3`},
		{"redis-sentinel://s1?master=m&password=x", `Redis URL redis-sentinel://s1?master=m&password=x: option password is not allowed here: hosts go before the path, separated by commas; credentials before the @; the sentinel's master in master=NAME`},
		{"redis-sentinel://s1?master=m&db=-1", `Redis URL redis-sentinel://s1?master=m&db=-1: database -1 is not a number from 0 up`},
		// The password never shows.
		{"redis-cluster://worker:hunter2@a,b/5", `Redis URL redis-cluster://worker:xxxxx@a,b/5: a Redis Cluster has database 0 only`},
		{"redis-cluster://worker:hun%zzter2@a", `Redis URL redis-cluster://worker:xxxxx@a: not a valid URL (want USER:PASSWORD@ before the hosts, with special characters in the password percent-encoded)`},
		{"redis-sentinel://worker:hunter2@s1", `Redis URL redis-sentinel://worker:xxxxx@s1: no master name (want ?master=NAME, the name the sentinels monitor)`},
	}
	for i, tt := range tests {
		r, err := ParseRedis(tt.url)
		require.Error(t, err, "%d: %s", i, tt.url)
		assert.Equal(t, tt.want, err.Error(), "%d: %s", i, tt.url)
		assert.ErrorIs(t, err, ErrUsage, "%d", i)
		assert.NotContains(t, err.Error(), "hun", "%d", i)
		assert.Nil(t, r, "%d", i)
	}
}

func TestRedisPingCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	ctx := context.Background()
	r, err := ParseRedis("redis-cluster://" + c.Addrs()[0]) // one seed is enough
	require.NoError(t, err)
	require.NoError(t, r.Ping(ctx))

	rdb := r.Client()
	defer rdb.Close()
	cc, ok := rdb.(*redis.ClusterClient)
	require.True(t, ok, "%T", rdb)
	require.NoError(t, cc.Set(ctx, "t:{a}", "1", time.Minute).Err())
	require.NoError(t, cc.Set(ctx, "t:{b}", "2", time.Minute).Err())

	ac := asynq.NewClient(r.Asynq())
	defer ac.Close()
	assert.NoError(t, ac.Ping())

	// A master that does not answer fails the check, naming the seeds.
	victim := c.Master(t, "t:{a}")
	victim.Kill(t)
	err = r.Ping(ctx)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "cannot reach Redis at Redis Cluster "+c.Addrs()[0]+": "), err.Error())
	assert.Equal(t, ExitFailure, ExitCode(err))
}

func TestRedisPingClusterUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	r, err := ParseRedis("redis-cluster://worker:hunter2@" + srv.Addr())
	require.NoError(t, err)
	err = r.Ping(context.Background())
	require.Error(t, err)
	assert.Equal(t, "cannot reach Redis at Redis Cluster "+srv.Addr()+": connection refused", err.Error())
}

func TestRedisPingSentinel(t *testing.T) {
	master := redistest.Start(t, "--requirepass", "hunter2")
	sentinel := redistest.StartSentinel(t, "jobs", master.Addr(), 1)
	ctx := context.Background()
	// The sentinel monitors a master with a password it does not know: it
	// still names it, which is all a client asks of it.
	r, err := ParseRedis("redis-sentinel://:hunter2@" + sentinel.Addr() + "?master=jobs")
	require.NoError(t, err)
	require.NoError(t, r.Ping(ctx))

	ac := asynq.NewClient(r.Asynq())
	defer ac.Close()
	assert.NoError(t, ac.Ping())

	rdb := r.Client()
	defer rdb.Close()
	require.NoError(t, rdb.Set(ctx, "t:k", "v", time.Minute).Err())
	got, err := master.Client(t).Get(ctx, "t:k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", got, "the write went to the master")

	r, err = ParseRedis("redis-sentinel://:hunter2@" + sentinel.Addr() + "?master=nosuch")
	require.NoError(t, err)
	err = r.Ping(ctx)
	require.Error(t, err)
	assert.Equal(t, "cannot reach Redis at master nosuch of Sentinel "+sentinel.Addr()+": no sentinel knows a master of that name", err.Error())

	sentinel.Stop()
	err = r.Ping(ctx)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "cannot reach Redis at master nosuch of Sentinel "+sentinel.Addr()+": "), err.Error())
	assert.Contains(t, err.Error(), "connection refused")
}
