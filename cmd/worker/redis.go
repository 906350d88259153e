package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
)

// pingTimeout bounds the first contact with each Redis.
const pingTimeout = 3 * time.Second

// redisConfig is where the worker's two Redis are: the queues (asynq's) and
// the limiter's buckets, which may be the same server. Either may be one
// server, a Redis Cluster or a master behind Sentinel.
type redisConfig struct {
	queueURL, limiterURL string
	queue, limiter       *cli.Redis
}

// same reports whether the limiter uses the queue Redis.
func (r redisConfig) same() bool { return r.queueURL == r.limiterURL }

// redisFromConfig parses --redis and --limiter-redis. Errors match
// cli.ErrUsage and never show a password.
func redisFromConfig(c config) (redisConfig, error) {
	r := redisConfig{queueURL: c.redisURL, limiterURL: c.limiterURL}
	var err error
	if r.queue, err = cli.ParseRedis(c.redisURL); err != nil {
		return r, err
	}
	if r.limiter, err = cli.ParseRedis(c.limiterURL); err != nil {
		return r, cli.Usagef("--limiter-redis: %w", err)
	}
	return r, nil
}

// ping checks that both Redis answer, at the same time, within pingTimeout
// each, and returns an error for each that does not: "cannot reach queue
// Redis at redis://HOST:PORT/DB: connection refused", or limiter. A shared
// server is asked once, as the queue Redis.
func (r redisConfig) ping(ctx context.Context) []error {
	check := func(which, url string, r *cli.Redis) error {
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		defer cancel()
		if err := r.Ping(pctx); err != nil {
			return nameRedis(err, which, url, r.Addr())
		}
		return nil
	}
	var (
		wg               sync.WaitGroup
		queueErr, limErr error
	)
	if !r.same() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			limErr = check("limiter", r.limiterURL, r.limiter)
		}()
	}
	queueErr = check("queue", r.queueURL, r.queue)
	wg.Wait()
	var errs []error
	for _, err := range []error{queueErr, limErr} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// nameRedis rewrites cli.Ping's "cannot reach Redis at ADDR: why" (or
// "cannot use") to say which of the worker's Redis it is, by its URL with
// the password redacted: the two may share a host.
func nameRedis(err error, which, url, addr string) error {
	msg := err.Error()
	for _, verb := range []string{"cannot reach", "cannot use"} {
		if why, ok := strings.CutPrefix(msg, verb+" Redis at "+addr+": "); ok {
			return fmt.Errorf("%s %s Redis at %s: %s", verb, which, cli.Redact(url), why)
		}
	}
	return fmt.Errorf("cannot reach %s Redis at %s: %w", which, cli.Redact(url), err)
}
