package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/workers"
)

// TestQueueOnRedisCluster runs the queue side (asynq, through queue.Client,
// workers.Pool and the worker and enqueue commands) and the limiter on one
// Redis Cluster of three masters, each with a replica. The subtests share the
// cluster and run in order; the last kills a master.
func TestQueueOnRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1)
	aopt := asynq.RedisClusterClientOpt{Addrs: c.Addrs()}
	insp := asynq.NewInspectorFromRedisClient(queue.FollowFailover(c.Client(t)))
	// A client of the kind an application enqueues with.
	qc := queue.NewClient(asynq.NewClientFromRedisClient(queue.FollowFailover(c.Client(t))))

	t.Run("jobs over three masters", func(t *testing.T) {
		queues := queuesOnMasters(t, c)
		prefix := redistest.Prefix(t)
		probe := startJitterProbe(t)
		rtt := startRTTProbe(t, c.Addrs()...)
		var log runLog
		for range 2 { // two hosts, each with its own connections
			startHAHost(t, aopt, c.Client(t), prefix, queues, &log)
		}
		b := newHABatch("a", queues, 120, 120, 90)
		probe.Reset()
		rtt.Reset()
		start := time.Now()
		b.enqueue(t, qc)
		took := waitRan(t, &log, b.ids, 30*time.Second)
		since := time.Since(start)

		assert.Zero(t, duplicates(&log, b.ids), "each job ran once")
		late := probe.Worst() + rtt.Worst()
		worst := checkRates(t, log.since(start), late, true)
		assert.Zero(t, checkQueues(t, insp, queues, &log, 10*time.Second), "no task left active")
		t.Logf("%d jobs over queues on 3 masters, 2 pools: all ran once in %v (%.0f jobs/s; the limits allow it in about 3 s); "+
			"worst excess over each bucket's limit, in tokens (≤ 0 conforms; allowed for jitter %v and round trips %v): %s",
			len(b.ids), took.Round(time.Millisecond), float64(len(b.ids))/since.Seconds(),
			probe.Worst().Round(time.Millisecond), rtt.Worst().Round(time.Millisecond), rateSummary(worst))
		t.Logf("queue masters: %s; bucket masters: %s", queueMasters(t, c, queues), bucketMasters(t, c, prefix))
	})

	t.Run("the worker and enqueue commands", func(t *testing.T) {
		url := "redis-cluster://" + strings.Join(c.Addrs()[:2], ",") // two seeds are enough
		q := haQueues(1)[0]
		const jobs = 60
		w := startProcess(t, "worker", bin.worker, []string{
			"--redis", url, "--key-prefix", redistest.Prefix(t), "--log-format", "json",
			"--queues", q, "--concurrency", "8", "--limit", "sleep=100/s,burst=10",
		})
		waitServers(t, insp, startTimeout, w)
		start := time.Now()
		code, out := runCommand(t, enqueueTimeout, bin.enqueue, "--redis", url, "--queue", q,
			"--type", "sleep", "--payload", `{"ms": 1}`, "--count", fmt.Sprint(jobs))
		require.Equal(t, 0, code, out)
		require.True(t, poll(20*time.Second, 50*time.Millisecond, func() bool {
			qi, err := insp.GetQueueInfo(q)
			return err == nil && qi.Processed >= jobs && qi.Pending+qi.Active+qi.Scheduled+qi.Retry == 0
		}), "the worker did not run the %d jobs", jobs)
		took := time.Since(start)
		s, _ := stopWorker(t, w, stopTimeout)
		assert.Equal(t, int64(jobs), s.Processed)
		assert.Zero(t, s.Archived+s.Failed)
		t.Logf("%s: %d sleep jobs at 100/s enqueued and run in %v", strings.TrimSpace(out), jobs, took.Round(time.Millisecond))
	})

	// Last: it kills a master.
	t.Run("a master dies mid-run", func(t *testing.T) {
		queues := queuesOnMasters(t, c)
		prefix := redistest.Prefix(t)
		var log runLog
		var pools []*workers.Pool
		for range 2 {
			pools = append(pools, startHAHost(t, aopt, c.Client(t), prefix, queues, &log))
		}
		// report's single bucket at 30/s makes the run last about 5 s.
		b := newHABatch("b", queues, 80, 80, 150)
		start := time.Now()
		b.enqueue(t, qc)
		enqueued := time.Since(start)

		// The victim serves the first queue: a third of the jobs live there.
		victim := c.Master(t, "asynq:{"+queues[0]+"}:pending")
		require.True(t, poll(20*time.Second, 10*time.Millisecond, func() bool { return log.count(b.ids) >= len(b.ids)/2 }),
			"the pools did not get going")
		before, buckets := log.count(b.ids), bucketMasters(t, c, prefix)
		victim.Kill(t)
		killed := time.Now()
		promoted := waitPromoted(t, c, queues[0], victim, 20*time.Second)
		gap := time.Since(killed)

		waitRan(t, &log, b.ids, 45*time.Second)
		allRan := time.Since(killed)
		left := checkQueues(t, insp, queues, &log, 10*time.Second)
		assert.LessOrEqual(t, left, maxLostEnds, "tasks left active: their end was not recorded")
		worst := checkRates(t, log.since(start), 0, false)
		t.Logf("%d jobs (enqueued in %v); %d had run when master %s (queue %s; buckets %s) was killed; "+
			"%s took over %v later; every job had run %v after the kill, %d runs were repeats, %d tasks left active; "+
			"the pools sent jobs back %d times",
			len(b.ids), enqueued.Round(time.Millisecond), before, victim.Addr(), queues[0], buckets,
			promoted.Addr(), gap.Round(10*time.Millisecond), allRan.Round(10*time.Millisecond),
			duplicates(&log, b.ids), left, requeued(pools))
		t.Logf("worst excess over each bucket's limit across the failover, in tokens (not checked: a failover may over-grant up to Burst + Rate×(lag + wait), see docs/redis-deployment.md): %s",
			rateSummary(worst))
	})
}

// queuesOnMasters returns three new queue names whose keys live on three
// different masters of c (asynq's keys are asynq:{QUEUE}:...).
func queuesOnMasters(t *testing.T, c *redistest.Cluster) []string {
	t.Helper()
	byMaster := make(map[*redistest.Server]string)
	for i := 0; len(byMaster) < 3; i++ {
		require.Less(t, i, 200, "no three queue names on three masters")
		q := haQueues(1)[0]
		m := c.Master(t, "asynq:{"+q+"}:pending")
		if _, ok := byMaster[m]; !ok {
			byMaster[m] = q
		}
	}
	var qs []string
	for _, q := range byMaster {
		qs = append(qs, q)
	}
	return qs
}

// queueMasters says which master holds each queue.
func queueMasters(t *testing.T, c *redistest.Cluster, queues []string) string {
	t.Helper()
	var parts []string
	for _, q := range queues {
		parts = append(parts, q+"@"+c.Master(t, "asynq:{"+q+"}:pending").Addr())
	}
	return strings.Join(parts, " ")
}

// bucketMasters says which master holds each bucket of the HA task types.
func bucketMasters(t *testing.T, c *redistest.Cluster, prefix string) string {
	t.Helper()
	keys := map[string]string{"report": prefix + "{report}", "api:*": prefix + "{api}:global"}
	for i := range haTenants {
		keys["mail:"+tenant(i)] = prefix + "{" + tenant(i) + "}"
	}
	byAddr := make(map[string][]string)
	for name, key := range keys {
		a := c.Master(t, key).Addr()
		byAddr[a] = append(byAddr[a], name)
	}
	var parts []string
	for a, names := range byAddr {
		parts = append(parts, fmt.Sprintf("%s=%v", a, names))
	}
	return strings.Join(parts, " ")
}

// waitPromoted waits until the running nodes say a node other than old
// serves queue q's slot, and returns it.
func waitPromoted(t *testing.T, c *redistest.Cluster, q string, old *redistest.Server, timeout time.Duration) *redistest.Server {
	t.Helper()
	var m *redistest.Server
	ok := poll(timeout, 20*time.Millisecond, func() bool {
		m = c.Master(t, "asynq:{"+q+"}:pending")
		return m != old
	})
	require.True(t, ok, "no replica took over %s's slots within %v", old.Addr(), timeout)
	return m
}
