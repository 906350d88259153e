package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Default ports of the nodes a multi-host URL names.
const (
	clusterPort  = "6379"
	sentinelPort = "26379"
)

// Redis is a Redis deployment named by a URL: one server, a Redis Cluster, or
// a master behind Sentinel. [ParseRedis] makes one; it holds options only,
// and each client it makes is the caller's to close.
type Redis struct {
	raw      string
	single   *redis.Options        // redis://, rediss://
	cluster  *redis.ClusterOptions // redis-cluster://, rediss-cluster://
	failover *redis.FailoverOptions
}

// ParseRedis parses a Redis URL of one of three forms:
//
//	redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?OPTIONS]     one server
//	redis-cluster://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][?OPTIONS]
//	redis-sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/DB]?master=NAME[&OPTIONS]
//
// and rediss, rediss-cluster, rediss-sentinel for the same over TLS, each node
// verified under its own host name. The first form is [RedisFromURL]'s. A
// cluster URL names some of the cluster's nodes (seeds, port 6379 by default),
// from which the client learns the rest; a cluster has database 0 only. A
// sentinel URL names the sentinels (port 26379 by default) and the master's
// name; USER and PASSWORD are those of the master and replicas, and the
// sentinels themselves must not require a password. OPTIONS are go-redis's,
// as for redis://.
//
// Every error matches [ErrUsage] and shows the URL with its password
// replaced (see [Redact]).
func ParseRedis(raw string) (*Redis, error) {
	scheme, _, _ := strings.Cut(raw, "://")
	scheme = strings.ToLower(scheme)
	r := &Redis{raw: raw}
	var err error
	switch scheme {
	case "redis-cluster", "rediss-cluster":
		r.cluster, err = clusterFromURL(raw, scheme == "rediss-cluster")
	case "redis-sentinel", "rediss-sentinel":
		r.failover, err = sentinelFromURL(raw, scheme == "rediss-sentinel")
	case "redis", "rediss":
		r.single, err = redisFromURL(raw)
	default:
		if strings.TrimSpace(raw) == "" || !strings.Contains(raw, "://") {
			r.single, err = redisFromURL(raw) // its message for these
			break
		}
		err = Usagef("Redis URL %s: scheme %q is not redis, rediss, redis-cluster or redis-sentinel (want redis://HOST:PORT/DB)",
			Redact(raw), scheme)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// multiURL is a URL naming several hosts, split up.
type multiURL struct {
	user     *url.Userinfo
	addrs    []string // HOST:PORT, the default port filled in
	db       int
	hasDB    bool
	query    url.Values
	rawQuery string
}

// parseMulti splits scheme://[USERINFO@]HOST[:PORT][,HOST[:PORT]...][/DB][?QUERY].
func parseMulti(raw, defaultPort string) (multiURL, error) {
	var m multiURL
	bad := func(format string, args ...any) error {
		return Usagef("Redis URL %s: %s", Redact(raw), fmt.Sprintf(format, args...))
	}
	_, rest, _ := strings.Cut(raw, "://")
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		return m, bad("unexpected fragment")
	}
	rest, m.rawQuery, _ = strings.Cut(rest, "?")
	hosts, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndexByte(hosts, '@'); at >= 0 {
		u, err := url.Parse("redis://" + hosts[:at+1] + "host")
		if err != nil {
			return m, bad("not a valid URL (want USER:PASSWORD@ before the hosts, with special characters in the password percent-encoded)")
		}
		m.user, hosts = u.User, hosts[at+1:]
	}
	for h := range strings.SplitSeq(hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			return m, bad("empty host in the list %q (want HOST:PORT,HOST:PORT)", hosts)
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			if !strings.Contains(err.Error(), "missing port") {
				return m, bad("host %q: %v", h, strings.TrimPrefix(err.Error(), "address "+h+": "))
			}
			host, port = strings.Trim(h, "[]"), defaultPort
		}
		if host == "" {
			return m, bad("no host in %q", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return m, bad("port %s is not from 1 to 65535", port)
		}
		m.addrs = append(m.addrs, net.JoinHostPort(host, port))
	}
	if path = strings.TrimSuffix(path, "/"); path != "" {
		n, err := strconv.Atoi(path)
		if err != nil || n < 0 || !isDigits(path) {
			return m, bad("database %q is not a number from 0 up (want /DB after the hosts, e.g. /0)", path)
		}
		m.db, m.hasDB = n, true
	}
	q, err := url.ParseQuery(m.rawQuery)
	if err != nil {
		return m, bad("options: %v", err)
	}
	m.query = q
	for _, k := range []string{"addr", "username", "password", "sentinel_username", "sentinel_password", "master_name"} {
		if q.Has(k) {
			return m, bad("option %s is not allowed here: hosts go before the path, separated by commas; "+
				"credentials before the @; the sentinel's master in master=NAME", k)
		}
	}
	return m, nil
}

// queryWithout returns m's options without those named, for go-redis's parsers.
func (m multiURL) queryWithout(names ...string) url.Values {
	q := url.Values{}
	for k, v := range m.query {
		q[k] = v
	}
	for _, n := range names {
		q.Del(n)
	}
	return q
}

func (m multiURL) credentials() (user, password string) {
	if m.user == nil {
		return "", ""
	}
	password, _ = m.user.Password()
	return m.user.Username(), password
}

func clusterFromURL(raw string, useTLS bool) (*redis.ClusterOptions, error) {
	m, err := parseMulti(raw, clusterPort)
	if err != nil {
		return nil, err
	}
	if m.db != 0 || m.query.Has("db") {
		return nil, Usagef("Redis URL %s: a Redis Cluster has database 0 only", Redact(raw))
	}
	// go-redis parses the options; the hosts and credentials are set here.
	opt, err := redis.ParseClusterURL("redis://" + m.addrs[0] + "?" + m.queryWithout().Encode())
	if err != nil {
		return nil, Usagef("Redis URL %s: %s", Redact(raw), strings.TrimPrefix(err.Error(), "redis: "))
	}
	opt.Addrs = m.addrs
	opt.Username, opt.Password = m.credentials()
	if useTLS {
		opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12} // ServerName from each node's address
	}
	opt.ContextTimeoutEnabled = true
	return opt, nil
}

func sentinelFromURL(raw string, useTLS bool) (*redis.FailoverOptions, error) {
	m, err := parseMulti(raw, sentinelPort)
	if err != nil {
		return nil, err
	}
	master := m.query.Get("master")
	if strings.TrimSpace(master) == "" {
		return nil, Usagef("Redis URL %s: no master name (want ?master=NAME, the name the sentinels monitor)", Redact(raw))
	}
	q := m.queryWithout("master")
	q.Set("master_name", master)
	if m.hasDB && q.Has("db") {
		return nil, Usagef("Redis URL %s: database given twice, as /%d and ?db=%s", Redact(raw), m.db, q.Get("db"))
	}
	opt, err := redis.ParseFailoverURL("redis://" + m.addrs[0] + "/" + strconv.Itoa(m.db) + "?" + q.Encode())
	if err != nil {
		return nil, Usagef("Redis URL %s: %s", Redact(raw), strings.TrimPrefix(err.Error(), "redis: "))
	}
	if opt.DB < 0 {
		return nil, Usagef("Redis URL %s: database %d is not a number from 0 up", Redact(raw), opt.DB)
	}
	opt.SentinelAddrs = m.addrs
	opt.Username, opt.Password = m.credentials()
	opt.TLSConfig = nil
	if useTLS {
		opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12} // ServerName from each node's address
	}
	opt.ContextTimeoutEnabled = true
	return opt, nil
}

// URL is the URL r was parsed from, password included: show it with [Redact].
func (r *Redis) URL() string { return r.raw }

// Addr names where r is, for messages: "HOST:PORT" for one server, "Redis
// Cluster HOST:PORT,..." for a cluster's seeds, "master NAME of Sentinel
// HOST:PORT,..." behind Sentinel.
func (r *Redis) Addr() string {
	switch {
	case r.cluster != nil:
		return "Redis Cluster " + strings.Join(r.cluster.Addrs, ",")
	case r.failover != nil:
		return "master " + r.failover.MasterName + " of Sentinel " + strings.Join(r.failover.SentinelAddrs, ",")
	}
	return r.single.Addr
}

// Client returns a new go-redis client for r, with ContextTimeoutEnabled: a
// *redis.Client, a *redis.ClusterClient, or a Sentinel failover client.
func (r *Redis) Client() redis.UniversalClient {
	switch {
	case r.cluster != nil:
		o := *r.cluster
		o.TLSConfig = cloneTLS(o.TLSConfig)
		return redis.NewClusterClient(&o)
	case r.failover != nil:
		o := *r.failover
		o.TLSConfig = cloneTLS(o.TLSConfig)
		return redis.NewFailoverClient(&o)
	}
	o := *r.single
	o.TLSConfig = cloneTLS(o.TLSConfig)
	return redis.NewClient(&o)
}

// Asynq returns asynq's options for r: an asynq.RedisClientOpt,
// RedisClusterClientOpt or RedisFailoverClientOpt, with the credentials, TLS,
// timeouts and pool size of the URL (and max_redirects on a cluster); asynq's
// options have no room for the others.
func (r *Redis) Asynq() asynq.RedisConnOpt {
	switch {
	case r.cluster != nil:
		o := r.cluster
		return asynq.RedisClusterClientOpt{
			Addrs: o.Addrs, MaxRedirects: o.MaxRedirects, Username: o.Username, Password: o.Password,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
			TLSConfig: cloneTLS(o.TLSConfig),
		}
	case r.failover != nil:
		f := r.failover
		return asynq.RedisFailoverClientOpt{
			MasterName: f.MasterName, SentinelAddrs: f.SentinelAddrs, Username: f.Username, Password: f.Password,
			DB: f.DB, DialTimeout: f.DialTimeout, ReadTimeout: f.ReadTimeout, WriteTimeout: f.WriteTimeout,
			PoolSize: f.PoolSize, TLSConfig: cloneTLS(f.TLSConfig),
		}
	}
	return asynqOpt(r.single)
}

func cloneTLS(c *tls.Config) *tls.Config {
	if c == nil {
		return nil
	}
	return c.Clone()
}

// Ping checks that r answers, as [Ping] does for one server, on connections of
// its own that it closes: on a cluster, every master; behind Sentinel, the
// master the sentinels name. Its errors read "cannot reach Redis at ADDR: why"
// or "cannot use Redis at ADDR: reply", ADDR being [Redis.Addr].
func (r *Redis) Ping(ctx context.Context) error {
	if r.single != nil {
		return Ping(ctx, r.single)
	}
	timeout := DefaultPingTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var err error
	if r.cluster != nil {
		o := *r.cluster
		o.MaxRedirects, o.MaxRetries, o.DialerRetries = -1, -1, 1
		o.PoolSize, o.MinIdleConns = 1, 0
		c := redis.NewClusterClient(&o)
		defer c.Close()
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			if err := m.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("master %s: %w", m.Options().Addr, err)
			}
			return nil
		})
	} else {
		o := *r.failover
		o.MaxRetries, o.DialerRetries = -1, 1
		o.PoolSize, o.MinIdleConns = 1, 0
		c := redis.NewFailoverClient(&o)
		defer c.Close()
		err = c.Ping(ctx).Err()
	}
	switch {
	case err == nil:
		return nil
	case r.failover != nil && errors.Is(err, redis.Nil):
		// The sentinels answered, but none named a master: go-redis says
		// "all sentinels ... are unreachable: redis: nil".
		return fmt.Errorf("cannot reach Redis at %s: no sentinel knows a master of that name", r.Addr())
	}
	return pingError(ctx, r.Addr(), timeout, err)
}
