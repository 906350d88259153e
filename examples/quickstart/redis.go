package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// backend is the Redis a run uses: the server REDIS_URL names, or an
// in-process miniredis.
//
// miniredis is a Redis written in Go, for tests. What matters here:
//   - its Lua is gopher-lua, not Redis's; asynq's scripts and sluice's run on
//     it unchanged (enqueue, dequeue, delayed forwarding, retries);
//   - TIME answers the machine's clock, as Redis does, so sluice's buckets
//     (timed by TIME inside their script) and asynq's scheduled jobs (timed by
//     the client's clock, which asynq passes to its scripts) agree, and
//     nothing needs SetTime or FastForward;
//   - keys never expire by themselves: a TTL only runs down when the program
//     calls FastForward. Idle buckets and asynq's heartbeats therefore stay
//     until the server is closed, which is harmless for one run.
//   - it is one process-wide lock around one map: fine for a few hundred
//     jobs a second, not a benchmark.
type backend struct {
	opts *redis.Options
	mr   *miniredis.Miniredis // nil when REDIS_URL names a server
}

// openBackend starts a miniredis when rawURL is empty, or else checks that
// the server rawURL names answers.
func openBackend(ctx context.Context, rawURL string) (*backend, error) {
	if rawURL == "" {
		mr, err := miniredis.Run()
		if err != nil {
			return nil, fmt.Errorf("start miniredis: %w", err)
		}
		return &backend{opts: &redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true}, mr: mr}, nil
	}
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL %s: %w", redact(rawURL), err)
	}
	opts.ContextTimeoutEnabled = true
	b := &backend{opts: opts}
	rdb := b.client()
	defer rdb.Close()
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		return nil, fmt.Errorf("cannot reach Redis at %s (REDIS_URL): %w", opts.Addr, err)
	}
	return b, nil
}

// client returns a new go-redis client, which the caller closes.
func (b *backend) client() *redis.Client {
	o := *b.opts
	return redis.NewClient(&o)
}

// queueOpt is the same Redis for asynq.
func (b *backend) queueOpt() asynq.RedisClientOpt {
	o := asynq.RedisClientOpt{
		Network:  b.opts.Network,
		Addr:     b.opts.Addr,
		Username: b.opts.Username,
		Password: b.opts.Password,
		DB:       b.opts.DB,
	}
	if b.opts.TLSConfig != nil {
		o.TLSConfig = b.opts.TLSConfig.Clone()
	}
	return o
}

// embedded reports whether the run uses its own miniredis.
func (b *backend) embedded() bool { return b.mr != nil }

func (b *backend) String() string {
	if b.mr != nil {
		return "in-process miniredis at " + b.opts.Addr
	}
	return "Redis at " + b.opts.Addr + " (REDIS_URL)"
}

// Close stops the miniredis, if the run started one.
func (b *backend) Close() {
	if b.mr != nil {
		b.mr.Close()
	}
}

// redact hides the password of a Redis URL, for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if strings.Contains(raw, "@") {
			return "(unparsable URL)"
		}
		return raw
	}
	return u.Redacted()
}
