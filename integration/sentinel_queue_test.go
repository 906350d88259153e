package integration

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/workers"
)

// sentinelMaster is the name the sentinels of the tests monitor.
const sentinelMaster = "sluice"

// TestQueueBehindSentinel runs the queue side and the limiter on a master
// with one replica behind three sentinels: asynq through
// asynq.RedisFailoverClientOpt, the limiter through redis.NewFailoverClient.
// The subtests run in order; the last kills the master.
func TestQueueBehindSentinel(t *testing.T) {
	master := redistest.Start(t)
	_, port, err := net.SplitHostPort(master.Addr())
	require.NoError(t, err)
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", port)
	var sentinels []string
	for range 3 {
		sentinels = append(sentinels, redistest.StartSentinel(t, sentinelMaster, master.Addr(), 2).Addr())
	}
	require.True(t, poll(10*time.Second, 50*time.Millisecond, func() bool {
		info, err := replica.Client(t).Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}), "the replica syncs")

	aopt := asynq.RedisFailoverClientOpt{MasterName: sentinelMaster, SentinelAddrs: sentinels}
	failover := func(t *testing.T) redis.UniversalClient {
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: sentinelMaster, SentinelAddrs: sentinels, ContextTimeoutEnabled: true,
		})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	insp := asynq.NewInspectorFromRedisClient(queue.FollowFailover(failover(t)))
	qc := queue.NewClient(asynq.NewClientFromRedisClient(queue.FollowFailover(failover(t))))

	t.Run("the worker and enqueue commands", func(t *testing.T) {
		url := "redis-sentinel://" + strings.Join(sentinels, ",") + "/0?master=" + sentinelMaster
		q := haQueues(1)[0]
		const jobs = 60
		w := startProcess(t, "worker", bin.worker, []string{
			"--redis", url, "--key-prefix", redistest.Prefix(t), "--log-format", "json",
			"--queues", q, "--concurrency", "8", "--limit", "sleep=100/s,burst=10",
		})
		waitServers(t, insp, startTimeout, w)
		code, out := runCommand(t, enqueueTimeout, bin.enqueue, "--redis", url, "--queue", q,
			"--type", "sleep", "--payload", `{"ms": 1}`, "--count", fmt.Sprint(jobs))
		require.Equal(t, 0, code, out)
		require.True(t, poll(20*time.Second, 50*time.Millisecond, func() bool {
			qi, err := insp.GetQueueInfo(q)
			return err == nil && qi.Processed >= jobs && qi.Pending+qi.Active+qi.Scheduled+qi.Retry == 0
		}), "the worker did not run the %d jobs", jobs)
		s, _ := stopWorker(t, w, stopTimeout)
		assert.Equal(t, int64(jobs), s.Processed)
		assert.Zero(t, s.Archived+s.Failed)
	})

	// Last: it kills the master.
	t.Run("the master dies mid-run", func(t *testing.T) {
		queues := haQueues(2)
		prefix := redistest.Prefix(t)
		probe := startJitterProbe(t)
		rtt := startRTTProbe(t, master.Addr())
		var log runLog
		var pools []*workers.Pool
		for range 2 {
			pools = append(pools, startHAHost(t, aopt, failover(t), prefix, queues, &log))
		}
		b := newHABatch("s", queues, 80, 80, 150)
		probe.Reset()
		rtt.Reset()
		start := time.Now()
		b.enqueue(t, qc)
		require.True(t, poll(20*time.Second, 10*time.Millisecond, func() bool { return log.count(b.ids) >= len(b.ids)/2 }),
			"the pools did not get going")
		before := log.count(b.ids)
		// Rates before the kill are checked as on one server.
		worst := checkRates(t, log.since(start), probe.Worst()+rtt.Worst(), true)
		beforeKill := time.Since(start)

		master.Kill(t)
		killed := time.Now()
		require.True(t, poll(20*time.Second, 20*time.Millisecond, func() bool {
			role, err := replica.Client(t).Do(context.Background(), "ROLE").Slice()
			return err == nil && len(role) > 0 && role[0] == "master"
		}), "the sentinels did not promote the replica")
		gap := time.Since(killed)

		waitRan(t, &log, b.ids, 45*time.Second)
		allRan := time.Since(killed)
		left := checkQueues(t, insp, queues, &log, 10*time.Second)
		assert.LessOrEqual(t, left, maxLostEnds, "tasks left active: their end was not recorded")
		t.Logf("%d jobs; %d ran in the %v before the master was killed (worst excess, tokens: %s); "+
			"the replica was promoted %v after the kill; every job had run %v after it, %d runs were repeats, %d tasks left active; "+
			"the pools sent jobs back %d times",
			len(b.ids), before, beforeKill.Round(time.Millisecond), rateSummary(worst), gap.Round(10*time.Millisecond),
			allRan.Round(10*time.Millisecond), duplicates(&log, b.ids), left, requeued(pools))
	})
}
