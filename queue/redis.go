package queue

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// failoverPause is how long a call waits before it tries again while a Redis
// Cluster or Sentinel failover is under way.
const failoverPause = 200 * time.Millisecond

// FollowFailover makes rdb, if it is a Redis Cluster client
// (*redis.ClusterClient) or a Sentinel failover client
// (redis.NewFailoverClient), ride out a failover of the queue's Redis, and
// returns it. Any other client is returned as it is. It adds a hook to rdb, so
// call it once per client, before the client is shared.
//
//   - After a network error, a cluster client reloads its slot map at once. A
//     master that died sends no MOVED, and go-redis would otherwise keep
//     sending that master's slots to the dead address until its periodic
//     reload, a minute later.
//   - A call whose context has a deadline, and that failed on the network or
//     with CLUSTERDOWN, TRYAGAIN, MASTERDOWN, LOADING or READONLY, is tried
//     again every 200 ms until it succeeds or the deadline is near, so it
//     waits out the election of a new master instead of failing. asynq gives
//     such a deadline (the job's lease, up to 30 s) to the calls that record
//     the end of a job, so a job that finishes during a failover is still
//     marked done, rather than left active until asynq's lease recovery runs
//     it again a minute or two later. A call without a deadline fails as it
//     would have.
//
// A call that is tried again may already have run on the old master, its
// reply lost; go-redis's own retries have the same effect. asynq's scripts
// then find the task gone or its id taken and say so: an Enqueue can fail
// with asynq.ErrTaskIDConflict although its task is on the queue.
//
// workers.Pool and workers.Hosts do this to their own connections. It is
// meant for asynq's client; a throttle.RedisStore handles failovers itself,
// and its calls must fail within their deadline, not wait it out.
func FollowFailover(rdb redis.UniversalClient) redis.UniversalClient {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		c.AddHook(failoverHook{cluster: c})
	case *redis.Client:
		// A failover client's options name no address: it dials through its sentinels.
		if c.Options().Addr == failoverAddr {
			c.AddHook(failoverHook{})
		}
	}
	return rdb
}

// failoverAddr is the address go-redis gives a Sentinel failover client's options.
const failoverAddr = "FailoverClient"

// failoverHook is FollowFailover's hook; cluster is nil for a Sentinel client.
type failoverHook struct {
	cluster *redis.ClusterClient
}

func (h failoverHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h failoverHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		for {
			err := next(ctx, cmd)
			if !transient(err) {
				return err
			}
			h.reload()
			deadline, ok := ctx.Deadline()
			if !ok || time.Until(deadline) < 2*failoverPause {
				return err
			}
			t := time.NewTimer(failoverPause)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
	}
}

// ProcessPipelineHook reloads a cluster's slot map after a network error, but
// never sends a pipeline again: asynq sends none.
func (h failoverHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if transient(err) {
			h.reload()
		}
		return err
	}
}

func (h failoverHook) reload() {
	if h.cluster != nil {
		h.cluster.ReloadState(context.Background())
	}
}

// transient reports an error that a failover explains: the network (the
// master is gone), or a reply saying the cluster or the master is not ready.
// A closed client, an ended context and any other reply are not transient.
func transient(err error) bool {
	var rerr redis.Error
	switch {
	case err == nil, errors.Is(err, redis.ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case !errors.As(err, &rerr):
		return true
	}
	return redis.IsClusterDownError(err) || redis.IsTryAgainError(err) || redis.IsMasterDownError(err) ||
		redis.IsLoadingError(err) || redis.IsReadOnlyError(err)
}
