package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
)

// startRedis starts the run's redis-server on a free loopback port, with an
// append-only file fsynced at every write: a restart (SIGKILL, then start
// again on the same port) is a crash that loses nothing the server
// acknowledged, so every job lost across one is a real loss, not the
// fault's. The script cache is not persisted: a restart flushes it as
// SCRIPT FLUSH does.
func startRedis() (*redistest.Server, *redis.Client, error) {
	srv, err := redistest.Launch("--appendonly", "yes", "--appendfsync", "always")
	if err != nil {
		return nil, nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	return srv, rdb, nil
}

// quietLog drops go-redis's own log lines: the run's Redis goes down on
// purpose, and the dial failures that follow are expected, not news.
type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietLog{}) }

// redisOpTimeout bounds one command the run sends itself (a fault, a look at
// the queue): a paused Redis must not stall the run.
const redisOpTimeout = 3 * time.Second

// pauseRedis freezes Redis with SIGSTOP for d, then continues it.
func pauseRedis(srv *redistest.Server, d time.Duration) error {
	if err := srv.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	time.Sleep(d)
	return srv.Signal(syscall.SIGCONT)
}

// restartRedis kills Redis with SIGKILL, leaves it down for d, and starts it
// again on its port from its append-only file.
func restartRedis(srv *redistest.Server, d time.Duration) error {
	if err := srv.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	time.Sleep(d)
	return srv.Relaunch()
}

// redisCommand runs one command against Redis, bounded by redisOpTimeout.
func redisCommand(rdb *redis.Client, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), redisOpTimeout)
	defer cancel()
	if err := rdb.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("%v: %w", args, err)
	}
	return nil
}
