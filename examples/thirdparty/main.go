// Thirdparty calls a rate-limited third-party API from a fleet of workers.
//
// A local fake of the partner's API allows 10 requests a second and answers
// 429 with Retry-After beyond that. Two worker pools, as if on two hosts,
// call it under a sluice policy of 10 a second, so in normal operation the
// API never has to refuse them. Then the API goes into a two-second
// maintenance window, answering every request 429 "Retry-After: 2". The
// first 429 a handler sees (it returns workers.FromResponse) puts the shared
// bucket in cooldown for both hosts: the fleet goes quiet until the window is
// over and resumes one request at a time, and the jobs that were refused come
// back after it. The summary shows the pause, how few 429s the fleet drew,
// and that no job was lost.
//
//	go run ./examples/thirdparty
//
// -max-wait sets how long a worker holds a job waiting for its turn (1s).
// With a short one, say 200ms, most jobs go back to the queue holding a turn
// booked before the window, and a booked turn is not checked again against a
// later cooldown: those jobs run into the window and draw a 429 each.
//
// Without REDIS_URL it starts an in-process Redis-compatible server
// (miniredis); with REDIS_URL=redis://host:port/db it uses that Redis.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

const (
	taskType = "partner:sync"
	jobs     = 80
	hosts    = 2
	window   = 2 * time.Second // the API's maintenance window
	windowAt = 25              // jobs done when it begins
)

var (
	// apiLimit is what the partner allows: 10 a second, 10 at once.
	apiLimit = throttle.Limit{Rate: 10, Burst: 10}
	// policyLimit is what the fleet allows itself: the partner's rate, with
	// a smaller burst.
	policyLimit = throttle.Limit{Rate: 10, Burst: 2}
)

func main() {
	maxWait := flag.Duration("max-wait", time.Second, "how long a worker holds a job waiting for its turn")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, *maxWait); err != nil {
		fmt.Fprintln(os.Stderr, "thirdparty:", err)
		stop()
		os.Exit(1)
	}
}

// account is the job's payload: sync one account to the partner.
type account struct {
	ID int `json:"id"`
}

// counts are what the handlers saw.
type counts struct {
	mu      sync.Mutex
	done    map[int]string // account id → host that synced it
	calls   int
	refused atomic.Int64 // 429s the handlers got
	all     chan struct{}
}

func run(ctx context.Context, out io.Writer, maxWait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	api := newFakeAPI(apiLimit)
	srv := httptest.NewServer(api)
	defer srv.Close()

	b, err := openBackend(ctx, os.Getenv("REDIS_URL"))
	if err != nil {
		return err
	}
	defer b.Close()
	id := runID()
	qname, prefix := "thirdparty-"+id, "sluice:thirdparty:"+id+":"
	fmt.Fprintf(out, "sluice thirdparty: %d jobs calling an API that allows %g/s, from %d hosts under one policy of %g/s, on %v\n",
		jobs, apiLimit.Rate, hosts, policyLimit.Rate, b)

	rdb := b.client()
	defer rdb.Close()
	ac := asynq.NewClientFromRedisClient(rdb)
	defer ac.Close()
	qc := queue.NewClient(ac)
	for i := 1; i <= jobs; i++ {
		payload, _ := json.Marshal(account{ID: i})
		if _, err := qc.Enqueue(ctx, queue.Task{Type: taskType, Payload: payload}, asynq.Queue(qname), asynq.MaxRetry(0)); err != nil {
			return err
		}
	}

	c := &counts{done: make(map[int]string), all: make(chan struct{})}
	client := &http.Client{Timeout: 5 * time.Second}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pools := make([]*workers.Pool, 0, hosts)
	limiters := make([]*throttle.RedisStore, 0, hosts)
	stopPools := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for _, p := range pools {
			wg.Add(1)
			go func() { defer wg.Done(); _ = p.Shutdown(sctx) }()
		}
		wg.Wait()
		for _, s := range limiters {
			s.Close()
		}
		pools, limiters = nil, nil
	}
	defer stopPools()
	start := time.Now()
	for i := range hosts {
		name := fmt.Sprintf("host-%c", 'a'+i)
		lrdb := b.client()
		defer lrdb.Close()
		store := throttle.NewRedisStore(lrdb)
		limiters = append(limiters, store)
		pool, err := workers.NewPool(workers.Config{
			Redis:                    b.queueOpt(),
			Limiter:                  throttle.NewLimiter(store, throttle.WithKeyPrefix(prefix)),
			Concurrency:              2,
			Queues:                   map[string]int{qname: 1},
			MaxWait:                  maxWait,
			DelayedTaskCheckInterval: 100 * time.Millisecond,
			TaskCheckInterval:        100 * time.Millisecond,
			ShutdownTimeout:          5 * time.Second,
			Logger:                   logger.With("host", name),
		})
		if err != nil {
			return err
		}
		pools = append(pools, pool)
		pool.HandleFunc(taskType, c.handler(name, client, srv.URL), &workers.Policy{Name: "partner-api", Limit: policyLimit})
		if err := pool.Start(); err != nil {
			return err
		}
	}

	// Watch: a progress line a second, and the maintenance window once
	// windowAt jobs are done.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	next, windowed := time.Second, false
	var waitErr error
wait:
	for {
		select {
		case <-c.all:
			break wait
		case <-ctx.Done():
			waitErr = ctx.Err()
			break wait
		case <-tick.C:
		}
		done := c.doneCount()
		if !windowed && done >= windowAt {
			windowed = true
			api.maintenance(window)
			fmt.Fprintf(out, "%5.1fs  the API goes into maintenance for %v: every request gets 429 Retry-After: 2\n",
				time.Since(start).Seconds(), window)
		}
		if el := time.Since(start); el >= next {
			next += time.Second
			var cooldowns, requeued int64
			for _, p := range pools {
				st := p.Stats()
				cooldowns += st.Cooldowns
				requeued += st.Requeued
			}
			fmt.Fprintf(out, "%5.0fs  done %2d/%d  429s %d  cooldowns %d  re-enqueued %d\n",
				el.Seconds(), done, jobs, c.refused.Load(), cooldowns, requeued)
		}
	}
	elapsed := time.Since(start)
	stats := make([]workers.Stats, len(pools))
	for i, p := range pools {
		stats[i] = p.Stats()
	}
	stopPools()

	insp := asynq.NewInspectorFromRedisClient(rdb)
	defer insp.Close()
	q, err := insp.GetQueueInfo(qname)
	if err != nil {
		return err
	}
	a := api.stats()
	c.mu.Lock()
	byHost := map[string]int{}
	for _, h := range c.done {
		byHost[h]++
	}
	done, calls := len(c.done), c.calls
	c.mu.Unlock()

	var cooldowns, requeued, failed int64
	var perHostCooldowns []string
	for i, st := range stats {
		cooldowns += st.Cooldowns
		requeued += st.Requeued
		failed += st.Failed
		perHostCooldowns = append(perHostCooldowns, fmt.Sprintf("host-%c %d", 'a'+i, st.Cooldowns))
	}
	inWindow := 0
	for _, n := range a.inWindow {
		inWindow += n
	}
	lost := q.Archived + q.Pending + q.Scheduled + q.Retry + q.Active + int(failed)
	verdict := "nothing lost"
	if lost > 0 || done != jobs || calls != done {
		verdict = "NOT ALL DONE"
	}

	fmt.Fprintf(out, "\nsummary (%v)\n", b)
	fmt.Fprintf(out, "  jobs         %d of %d done, %d successful runs in all (a job refused with 429 runs again after the cooldown): %s\n",
		done, jobs, calls, joinCounts(byHost))
	fmt.Fprintf(out, "  queue        archived %d, failed %d, pending %d, scheduled %d, retry %d, active %d: %s (jobs had MaxRetry 0)\n",
		q.Archived, failed, q.Pending, q.Scheduled, q.Retry, q.Active, verdict)
	fmt.Fprintf(out, "  api          %d answered 200; %d answered 429: %d in the maintenance window (%s), %d for going over %g/s\n",
		a.ok, inWindow+a.overLimit, inWindow, joinCounts(a.inWindow), a.overLimit, apiLimit.Rate)
	fmt.Fprintf(out, "  window       %.1fs to %.1fs; the fleet sent nothing from %.1fs to %.1fs (%.1fs quiet)\n",
		a.windowStart.Seconds(), a.windowEnd.Seconds(), a.quietFrom.Seconds(), a.quietTo.Seconds(), (a.quietTo - a.quietFrom).Seconds())
	fmt.Fprintf(out, "  cooldowns    %d put on the shared bucket (%s), one per 429; every 429'd job came back after it (%d re-enqueues)\n",
		cooldowns, strings.Join(perHostCooldowns, ", "), requeued)
	fmt.Fprintf(out, "  elapsed      %.1fs; %d jobs at %g/s take %.1fs, plus the %v window\n",
		elapsed.Seconds(), jobs, policyLimit.Rate, float64(jobs-policyLimit.Burst)/policyLimit.Rate, window)

	if b.mr == nil {
		if err := removeQueue(rdb, insp, qname, waitErr != nil); err != nil {
			fmt.Fprintf(out, "could not remove queue %s: %v\n", qname, err)
		}
	}
	if waitErr != nil {
		return fmt.Errorf("stopped with %d of %d jobs done: %w", done, jobs, waitErr)
	}
	if verdict != "nothing lost" {
		return errors.New("not every job ran exactly once")
	}
	return nil
}

// handler calls the API for one account. A 429 or 503 becomes a
// *workers.UpstreamError: the pool cools the bucket down for every host and
// brings the job back after it.
func (c *counts) handler(host string, client *http.Client, base string) func(context.Context, *asynq.Task) error {
	return func(ctx context.Context, t *asynq.Task) error {
		var acct account
		if err := json.Unmarshal(t.Payload(), &acct); err != nil {
			return fmt.Errorf("bad payload: %w: %w", err, asynq.SkipRetry)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/v1/accounts/%d/sync", base, acct.ID), nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-Host", host)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if err := workers.FromResponse(resp, time.Now()); err != nil {
			c.refused.Add(1)
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("account %d: API answered %s", acct.ID, resp.Status)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.calls++
		if _, dup := c.done[acct.ID]; !dup {
			c.done[acct.ID] = host
			if len(c.done) == jobs {
				close(c.all)
			}
		}
		return nil
	}
}

func (c *counts) doneCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.done)
}

func joinCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func runID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// removeQueue removes queue qname, with the jobs left in it if force is set,
// and the counters asynq's DeleteQueue leaves behind: every key of the queue
// is named "asynq:{<qname>}:...", and the name is this run's own.
func removeQueue(rdb *redis.Client, insp *asynq.Inspector, qname string, force bool) error {
	if err := insp.DeleteQueue(qname, force); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, "asynq:{"+qname+"}:*", 100).Iterator()
	for iter.Next(ctx) {
		if err := rdb.Del(ctx, iter.Val()).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}
