package cli

import (
	"context"
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

// DefaultPingTimeout bounds [Ping] when its context has no deadline.
const DefaultPingTimeout = 3 * time.Second

// RedisFromURL parses a Redis URL,
//
//	redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?OPTIONS]
//	rediss://...    (the same over TLS, verifying the server's certificate for HOST)
//
// and returns options for a go-redis client (with ContextTimeoutEnabled, so
// that a context's deadline bounds every call) and for asynq. PORT defaults to
// 6379 and DB to 0. OPTIONS are go-redis's URL options, such as
// dial_timeout=2s or pool_size=20; asynq gets the timeouts and pool size
// among them.
//
// An empty URL is the error "no Redis: pass --redis or set REDIS_URL". Every
// error matches [ErrUsage] and shows the URL with its password replaced (see
// [Redact]).
func RedisFromURL(raw string) (*redis.Options, asynq.RedisClientOpt, error) {
	opt, err := redisFromURL(raw)
	if err != nil {
		return nil, asynq.RedisClientOpt{}, err
	}
	return opt, asynqOpt(opt), nil
}

// asynqOpt is asynq's RedisClientOpt for opt, with its own copy of the TLS config.
func asynqOpt(opt *redis.Options) asynq.RedisClientOpt {
	aopt := asynq.RedisClientOpt{
		Network:      opt.Network,
		Addr:         opt.Addr,
		Username:     opt.Username,
		Password:     opt.Password,
		DB:           opt.DB,
		DialTimeout:  opt.DialTimeout,
		ReadTimeout:  opt.ReadTimeout,
		WriteTimeout: opt.WriteTimeout,
		PoolSize:     opt.PoolSize,
	}
	if opt.TLSConfig != nil {
		aopt.TLSConfig = opt.TLSConfig.Clone()
	}
	return aopt
}

func redisFromURL(raw string) (*redis.Options, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, Usagef("no Redis: pass --redis or set REDIS_URL")
	}
	bad := func(format string, args ...any) error {
		return Usagef("Redis URL %s: %s", Redact(raw), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(raw)
	if err != nil {
		if Redact(raw) != raw {
			// The parser's complaint may quote a piece of the password.
			return nil, bad("not a valid URL (want redis://USER:PASSWORD@HOST:PORT/DB, with special characters in the password percent-encoded)")
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // ue.Error() quotes the whole URL
		}
		return nil, bad("%v (want redis://HOST:PORT/DB)", err)
	}
	switch {
	case u.Scheme != "redis" && u.Scheme != "rediss":
		return nil, bad("scheme %q is not redis or rediss (want redis://HOST:PORT/DB)", u.Scheme)
	case u.Opaque != "":
		return nil, bad("want redis://HOST:PORT/DB")
	case u.Hostname() == "":
		return nil, bad("no host (want redis://HOST:PORT/DB)")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, bad("port %s is not from 1 to 65535", p)
		}
	}
	db := 0
	if path := strings.TrimPrefix(u.Path, "/"); path != "" {
		n, err := strconv.Atoi(path)
		if err != nil || n < 0 || !isDigits(path) {
			return nil, bad("database %q is not a number from 0 up (want /DB after the host, e.g. /0)", path)
		}
		db = n
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		return nil, bad("%s", strings.TrimPrefix(err.Error(), "redis: "))
	}
	if q := u.Query(); q.Has("db") && opt.DB != db && u.Path != "" {
		return nil, bad("database given twice, as /%d and ?db=%d", db, opt.DB)
	}
	if opt.DB < 0 {
		return nil, bad("database %d is not a number from 0 up", opt.DB)
	}
	opt.ContextTimeoutEnabled = true
	return opt, nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Redact returns raw with the password of its user information, if any,
// replaced by "xxxxx", for messages and logs. It copes with URLs that do not
// parse, and returns anything without user information as it is.
func Redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndexByte(rest[:end], '@')
	if at < 0 {
		return raw
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// Ping checks that Redis answers PING with the options opt, on a connection
// of its own that it closes. ctx bounds the check; without a deadline,
// [DefaultPingTimeout] does. The error reads
//
//	cannot reach Redis at 127.0.0.1:6390: connection refused
//
// when nothing answers, and "cannot use Redis at ADDR: <reply>" when Redis
// refuses (a wrong password, a database out of range). It never shows the
// password.
func Ping(ctx context.Context, opt *redis.Options) error {
	timeout := DefaultPingTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	o := *opt
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1   // one try: the caller wants an answer, not a wait
	o.DialerRetries = 1 // and one dial
	o.PoolSize = 1
	o.MinIdleConns = 0
	c := redis.NewClient(&o)
	defer c.Close()

	err := c.Ping(ctx).Err()
	if err == nil {
		return nil
	}
	return pingError(ctx, opt.Addr, timeout, err)
}

// pingError is the error of a failed ping of the Redis at addr within
// timeout; ctx is the ping's.
func pingError(ctx context.Context, addr string, timeout time.Duration, err error) error {
	var rerr redis.Error
	switch {
	case errors.As(err, &rerr):
		return fmt.Errorf("cannot use Redis at %s: %v", addr, err)
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		if ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled) {
			return fmt.Errorf("cannot reach Redis at %s: %w", addr, context.Canceled)
		}
		return fmt.Errorf("cannot reach Redis at %s: no answer within %v", addr, roundTimeout(timeout))
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("cannot reach Redis at %s: %w", addr, err)
	}
	return fmt.Errorf("cannot reach Redis at %s: %v", addr, rootCause(err))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// rootCause returns the innermost error of a chain: "connection refused"
// rather than "dial tcp 127.0.0.1:6390: connect: connection refused". A DNS
// error keeps its own message, which names the host.
func rootCause(err error) error {
	for {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && err == error(dnsErr) {
			return err
		}
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// roundTimeout rounds a timeout for a message: to 100 ms from a second up, as
// a deadline read a moment after it was set is a hair short (2.998s for 3s).
func roundTimeout(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// QuietRedisLog stops go-redis from logging its own dial failures: the
// commands report a Redis they cannot reach themselves, once and readably.
func QuietRedisLog() { redis.SetLogger(quietLogger{}) }

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
