package main

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// backend is the Redis a run uses: the server REDIS_URL names, or else an
// in-process miniredis (see examples/quickstart for what that means).
type backend struct {
	opts *redis.Options
	mr   *miniredis.Miniredis // nil with REDIS_URL
}

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
		return nil, fmt.Errorf("REDIS_URL: %w", err)
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
	o := asynq.RedisClientOpt{Network: b.opts.Network, Addr: b.opts.Addr, Username: b.opts.Username, Password: b.opts.Password, DB: b.opts.DB}
	if b.opts.TLSConfig != nil {
		o.TLSConfig = b.opts.TLSConfig.Clone()
	}
	return o
}

func (b *backend) String() string {
	if b.mr != nil {
		return "in-process miniredis at " + b.opts.Addr
	}
	return "Redis at " + b.opts.Addr + " (REDIS_URL)"
}

func (b *backend) Close() {
	if b.mr != nil {
		b.mr.Close()
	}
}
