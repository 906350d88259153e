package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/asynqtest"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// What the Redis Cluster and Sentinel tests of the queue side share: in-process
// pools (one per "host", each with a limiter of its own) running three task
// types, each throttled another way, and a record of every handler run.

// The task types of the HA tests and their limits. mail has a bucket per
// tenant, spread over the cluster's masters; api takes a per-tenant bucket
// and a global one together, both under the hash tag {api}; report shares one
// bucket.
const (
	haTenants = 4
	haHandle  = 5 * time.Millisecond // each job's work

	// maxLostEnds bounds the tasks a killed master may leave active although
	// they ran. Redis replicates after it answers: the writes it answered in
	// its last moment (one turn of its event loop, a command or two at these
	// rates) may never reach the replica, and if one of them ended a job,
	// the promoted replica still holds the job as active. Every other end of
	// a job waits out the failover (queue.FollowFailover) and is recorded.
	maxLostEnds = 2
)

// go-redis logs its own dial failures, which these tests cause on purpose;
// the tests report what matters themselves, as cmd/worker does.
func init() { redis.SetLogger(quietLogger{}) }

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

var (
	mailLimit   = throttle.Limit{Rate: 60, Period: time.Second, Burst: 6}
	apiLimit    = throttle.Limit{Rate: 40, Period: time.Second, Burst: 4}
	apiGlobal   = throttle.Limit{Rate: 60, Period: time.Second, Burst: 6}
	reportLimit = throttle.Limit{Rate: 30, Period: time.Second, Burst: 3}
)

// haJob is a job's payload.
type haJob struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
}

// haRun is one run of a job's handler, by the buckets it took tokens from.
type haRun struct {
	id      string
	buckets []string
	at      time.Time
}

// runLog records every handler run. Its methods are safe for concurrent use.
type runLog struct {
	mu   sync.Mutex
	runs []haRun
}

func (l *runLog) add(r haRun) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, r)
}

// byID counts the runs of each job.
func (l *runLog) byID() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[string]int, len(l.runs))
	for _, r := range l.runs {
		m[r.id]++
	}
	return m
}

// since returns the runs from start on, in order of time.
func (l *runLog) since(start time.Time) []haRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []haRun
	for _, r := range l.runs {
		if !r.at.Before(start) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// count is how many of ids have run at least once.
func (l *runLog) count(ids []string) int {
	seen := l.byID()
	n := 0
	for _, id := range ids {
		if seen[id] > 0 {
			n++
		}
	}
	return n
}

// haBucketLimits maps each bucket name a run records to its limit.
func haBucketLimits() map[string]throttle.Limit {
	m := map[string]throttle.Limit{"api:global": apiGlobal, "report": reportLimit}
	for i := range haTenants {
		t := tenant(i)
		m["mail:"+t] = mailLimit
		m["api:"+t] = apiLimit
	}
	return m
}

func tenant(i int) string { return fmt.Sprintf("t%d", i%haTenants) }

// haPolicies are the three task types' policies.
func haPolicies(t *testing.T) map[string]*workers.Policy {
	t.Helper()
	byTenant, err := workers.KeyTemplate("{payload.tenant}")
	require.NoError(t, err)
	global := apiGlobal
	return map[string]*workers.Policy{
		"mail":   {Name: "mail", Limit: mailLimit, Key: byTenant},
		"api":    {Name: "api", Limit: apiLimit, Key: byTenant, Global: &global},
		"report": {Name: "report", Limit: reportLimit},
	}
}

// startHAHost starts one worker process of a fleet, in process: a pool on
// the queues at r with a limiter of its own over limiterRdb (keys under
// prefix), running the three task types and recording runs in log. It is
// shut down when t ends.
func startHAHost(t *testing.T, r asynq.RedisConnOpt, limiterRdb redis.UniversalClient, prefix string, queues []string, log *runLog) *workers.Pool {
	t.Helper()
	store := throttle.NewRedisStore(limiterRdb)
	t.Cleanup(func() { _ = store.Close() })
	qs := make(map[string]int, len(queues))
	for _, q := range queues {
		qs[q] = 1
	}
	pool, err := workers.NewPool(workers.Config{
		Redis:                    r,
		Limiter:                  throttle.NewLimiter(store, throttle.WithKeyPrefix(prefix)),
		Concurrency:              16,
		Queues:                   qs,
		DelayedTaskCheckInterval: 100 * time.Millisecond,
		TaskCheckInterval:        20 * time.Millisecond,
		ShutdownTimeout:          2 * time.Second,
		// Errors while a master is down are expected; a failing test shows
		// the counts, which say more.
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	for typ, pol := range haPolicies(t) {
		pool.HandleFunc(typ, func(ctx context.Context, task *asynq.Task) error {
			var j haJob
			if err := json.Unmarshal(task.Payload(), &j); err != nil {
				return fmt.Errorf("bad payload: %w", err)
			}
			run := haRun{id: j.ID, at: time.Now()}
			switch typ {
			case "mail":
				run.buckets = []string{"mail:" + j.Tenant}
			case "api":
				run.buckets = []string{"api:" + j.Tenant, "api:global"}
			default:
				run.buckets = []string{typ}
			}
			log.add(run)
			time.Sleep(haHandle)
			return nil
		}, pol)
	}
	require.NoError(t, pool.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		assert.NoError(t, pool.Shutdown(ctx), "shut the pool down")
	})
	return pool
}

// requeued is how many times the pools sent a job back to its queue.
func requeued(pools []*workers.Pool) int64 {
	var n int64
	for _, p := range pools {
		n += p.Stats().Requeued
	}
	return n
}

// haBatch is a set of jobs to enqueue: n of each of the three types, spread
// over queues and tenants round robin.
type haBatch struct {
	ids  []string
	jobs []queue.Task
	opts [][]asynq.Option
}

func newHABatch(name string, queues []string, mail, api, report int) haBatch {
	var b haBatch
	add := func(typ string, n int) {
		for i := range n {
			id := fmt.Sprintf("%s-%s-%04d", name, typ, i)
			payload, _ := json.Marshal(haJob{ID: id, Tenant: tenant(i)})
			b.ids = append(b.ids, id)
			b.jobs = append(b.jobs, queue.Task{Type: typ, Payload: payload})
			b.opts = append(b.opts, []asynq.Option{asynq.Queue(queues[len(b.ids)%len(queues)])})
		}
	}
	add("mail", mail)
	add("api", api)
	add("report", report)
	return b
}

// enqueue sends the batch through qc, from a few goroutines.
func (b haBatch) enqueue(t *testing.T, qc *queue.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), enqueueTimeout)
	defer cancel()
	const senders = 8
	errs := make(chan error, senders)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s; i < len(b.jobs); i += senders {
				if _, err := qc.Enqueue(ctx, b.jobs[i], b.opts[i]...); err != nil {
					errs <- fmt.Errorf("enqueue %s: %w", b.ids[i], err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// waitRan waits up to timeout until every job of ids has run, and fails the
// test with the missing ones if not. It returns how long that took.
func waitRan(t *testing.T, log *runLog, ids []string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if !poll(timeout, 20*time.Millisecond, func() bool { return log.count(ids) == len(ids) }) {
		seen := log.byID()
		var missing []string
		for _, id := range ids {
			if seen[id] == 0 {
				missing = append(missing, id)
			}
		}
		t.Fatalf("%d of %d jobs never ran within %v, e.g. %v", len(missing), len(ids), timeout, missing[:min(len(missing), 10)])
	}
	return time.Since(start)
}

// duplicates is how many runs of ids were second or later runs of a job.
func duplicates(log *runLog, ids []string) int {
	seen := log.byID()
	n := 0
	for _, id := range ids {
		n += max(seen[id]-1, 0)
	}
	return n
}

// checkRates checks the runs against each bucket's limit: no stretch of runs
// [a_i, a_j] of one bucket holds more than Burst + Rate·(a_j − a_i) tokens,
// give or take what a run may be late by: the machine's scheduling jitter
// and the slowest Redis round trip, as the probes saw them, and 10 ms. It
// returns the worst excess seen, in tokens, by bucket.
func checkRates(t *testing.T, runs []haRun, jitter time.Duration, strict bool) map[string]float64 {
	t.Helper()
	at := make(map[string][]time.Time)
	for _, r := range runs {
		for _, b := range r.buckets {
			at[b] = append(at[b], r.at)
		}
	}
	worst := make(map[string]float64)
	for b, l := range haBucketLimits() {
		if len(at[b]) == 0 {
			continue
		}
		rate := l.Rate / l.Period.Seconds()
		e, where := excess(at[b], rate, l.Burst)
		worst[b] = e
		// A run late by the jitter, followed by one on time, squeezes its
		// stretch by that much: rate × jitter tokens.
		if allowed := rate * (jitter + 10*time.Millisecond).Seconds(); strict && e > allowed {
			t.Errorf("bucket %s (%v/s, burst %d): %d runs exceed the limit by %.2f tokens at run %d (allowed for lateness %v: %.2f)",
				b, rate, l.Burst, len(at[b]), e, where, jitter, allowed)
		}
	}
	return worst
}

// checkQueues checks that the queues hold nothing pending, scheduled, retrying
// or archived, and that any task still active has run: asynq left it active
// only because the write that ended it was lost with a master (its lease
// recovery will run it again, a minute or two later). It waits up to timeout
// for the queues to settle and returns how many tasks were left active.
func checkQueues(t *testing.T, insp *asynq.Inspector, queues []string, log *runLog, timeout time.Duration) int {
	t.Helper()
	var infos []*asynq.QueueInfo
	settled := poll(timeout, 100*time.Millisecond, func() bool {
		infos = infos[:0]
		for _, q := range queues {
			qi, err := insp.GetQueueInfo(q)
			if err != nil {
				return false
			}
			if qi.Pending+qi.Scheduled+qi.Retry+qi.Active > 0 {
				return false
			}
			infos = append(infos, qi)
		}
		return true
	})
	left := 0
	seen := log.byID()
	for _, q := range queues {
		qi, err := insp.GetQueueInfo(q)
		require.NoError(t, err, "queue %s", q)
		assert.Zero(t, qi.Pending+qi.Scheduled+qi.Retry, "queue %s: %s", q, counts(*qi))
		if !assert.Zero(t, qi.Archived, "queue %s: nothing archived", q) {
			ts, _ := insp.ListArchivedTasks(q)
			t.Logf("archived in %s: %v", q, lastErrs(ts))
		}
		if settled || qi.Active == 0 {
			continue
		}
		active, err := insp.ListActiveTasks(q, asynq.PageSize(1000))
		require.NoError(t, err)
		for _, ti := range active {
			var j haJob
			require.NoError(t, json.Unmarshal(ti.Payload, &j))
			assert.Positive(t, seen[j.ID], "queue %s: task %s (job %s) is active but never ran", q, ti.ID, j.ID)
		}
		left += len(active)
	}
	return left
}

// rttProbe measures the worst round trip to a set of Redis servers: it pings
// each every rttTick and keeps the slowest answer (a server that does not
// answer is skipped). A job's turn is reckoned from when the limiter's answer
// arrives, and a job that waited asks once more (for a cooldown) before its
// handler runs, so a slow round trip makes a run late as a slow goroutine
// does; the rate checks allow for both.
type rttProbe struct {
	worst atomic.Int64 // ns
	stop  chan struct{}
	done  chan struct{}
}

const rttTick = 10 * time.Millisecond

// startRTTProbe starts a probe of the servers at addrs that runs until tb ends.
func startRTTProbe(tb testing.TB, addrs ...string) *rttProbe {
	p := &rttProbe{stop: make(chan struct{}), done: make(chan struct{})}
	clients := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, PoolSize: 1})
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(rttTick)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			for _, c := range clients {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				start := time.Now()
				err := c.Ping(ctx).Err()
				cancel()
				if rtt := time.Since(start); err == nil && rtt > time.Duration(p.worst.Load()) {
					p.worst.Store(int64(rtt))
				}
			}
		}
	}()
	tb.Cleanup(func() {
		close(p.stop)
		<-p.done
		for _, c := range clients {
			_ = c.Close()
		}
	})
	return p
}

// Reset forgets what the probe has seen.
func (p *rttProbe) Reset() { p.worst.Store(0) }

// Worst is the slowest round trip seen since the last Reset.
func (p *rttProbe) Worst() time.Duration { return time.Duration(p.worst.Load()) }

// haQueues returns n queue names no other test uses.
func haQueues(n int) []string {
	qs := make([]string, n)
	for i := range qs {
		qs[i] = asynqtest.QueueName()
	}
	slices.Sort(qs)
	return qs
}

// rateSummary formats checkRates' result for a log line.
func rateSummary(worst map[string]float64) string {
	names := make([]string, 0, len(worst))
	for b := range worst {
		names = append(names, b)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, b := range names {
		parts[i] = fmt.Sprintf("%s %+.2f", b, worst[b])
	}
	return strings.Join(parts, ", ")
}
