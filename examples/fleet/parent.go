package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/queue"
)

// child is one worker process, as the parent sees it.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	ready chan struct{} // closed on its "ready" line
	ended chan struct{} // closed once its output has ended and it has exited

	mu        sync.Mutex
	jobs      int   // "job" lines
	processed int   // its "processed" line; -1 until then
	exitErr   error // from Wait
}

// event is one job run, reported by a worker.
type event struct {
	child *child
	id    int
	at    time.Time
}

func runParent(ctx context.Context, out io.Writer, n, jobs int, wf workerFlags) error {
	if n < 1 || jobs < 1 {
		return errors.New("-workers and -jobs must be at least 1")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	redisURL, where, closeRedis, err := redisForFleet()
	if err != nil {
		return err
	}
	defer closeRedis()
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cannot reach Redis at %s: %w", opts.Addr, err)
	}

	id := runID()
	wf.queue, wf.prefix = "fleet-"+id, "sluice:fleet:"+id+":"

	// Start the workers and wait until every one is taking jobs.
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	events := make(chan event, jobs)
	children := make([]*child, n)
	for i := range children {
		wf.name = fmt.Sprintf("worker-%d", i+1)
		c, err := startChild(exe, redisURL, wf, events)
		if err != nil {
			stopChildren(children[:i])
			return err
		}
		children[i] = c
	}
	defer stopChildren(children)
	var pids []string
	for _, c := range children {
		pids = append(pids, strconv.Itoa(c.cmd.Process.Pid))
	}
	fmt.Fprintf(out, "sluice fleet: %d worker processes (pids %s) sharing one limit of %g/s (burst %d), on %s\n",
		n, strings.Join(pids, ", "), limit.Rate, limit.Burst, where)
	for _, c := range children {
		select {
		case <-c.ready:
		case <-c.ended:
			return fmt.Errorf("%s exited before it was ready: %v", c.name, c.exitErr)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to be ready: %w", c.name, ctx.Err())
		}
	}

	// Enqueue from here; the workers take the jobs.
	ac := asynq.NewClientFromRedisClient(rdb)
	defer ac.Close()
	qc := queue.NewClient(ac)
	for i := 1; i <= jobs; i++ {
		payload, _ := json.Marshal(thumbnail{ID: i})
		if _, err := qc.Enqueue(ctx, queue.Task{Type: taskType, Payload: payload}, asynq.Queue(wf.queue), asynq.MaxRetry(0)); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "enqueued %d %q jobs on queue %s\n", jobs, taskType, wf.queue)

	// Wait for every job to run, from the workers' own reports.
	start := time.Now()
	seen := make(map[int]bool, jobs)
	var runs []time.Time
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var waitErr error
wait:
	for len(seen) < jobs {
		select {
		case ev := <-events:
			seen[ev.id] = true
			runs = append(runs, ev.at)
		case <-tick.C:
			var parts []string
			for _, c := range children {
				parts = append(parts, fmt.Sprintf("%s %3d", c.name, c.jobCount()))
			}
			fmt.Fprintf(out, "%5.0fs  done %3d/%d   %s\n", time.Since(start).Seconds(), len(seen), jobs, strings.Join(parts, "  "))
		case <-ctx.Done():
			waitErr = ctx.Err()
			break wait
		}
	}

	// Stop the workers: SIGTERM, a graceful shutdown, and their last line.
	stopChildren(children)
	for len(events) > 0 { // what they reported after we stopped waiting
		ev := <-events
		seen[ev.id] = true
		runs = append(runs, ev.at)
	}

	insp := asynq.NewInspectorFromRedisClient(rdb)
	defer insp.Close()
	q, err := insp.GetQueueInfo(wf.queue)
	if err != nil {
		return err
	}
	var lines []string
	total, agree, exitedOK := 0, true, true
	for _, c := range children {
		c.mu.Lock()
		status := "exited 0"
		if c.exitErr != nil {
			status, exitedOK = "ended: "+c.exitErr.Error(), false
		}
		said := fmt.Sprintf("said %q", fmt.Sprintf("%s %d", lineProcessed, c.processed))
		if c.processed < 0 {
			said = "said nothing"
		}
		if c.processed != c.jobs {
			agree = false
		}
		lines = append(lines, fmt.Sprintf("%-12s pid %d ran %d jobs; stopped, it shut down gracefully, %s and %s", c.name, c.cmd.Process.Pid, c.jobs, said, status))
		total += c.jobs
		c.mu.Unlock()
	}
	slices.SortFunc(runs, time.Time.Compare)
	fmt.Fprintf(out, "\nsummary (%s)\n", where)
	for _, l := range lines {
		fmt.Fprintf(out, "  %s\n", l)
	}
	once := "each once"
	if total != len(seen) {
		once = fmt.Sprintf("%d runs: some ran twice", total)
	}
	fmt.Fprintf(out, "  jobs         %d of %d done, %s\n", len(seen), jobs, once)
	if m := len(runs); m > limit.Burst {
		span := runs[m-1].Sub(runs[0])
		steady := float64(m-limit.Burst) / span.Seconds()
		fmt.Fprintf(out, "  elapsed      %.1fs from the first job to the last; ideal %.1fs (a burst of %d, then %d at %g/s)\n",
			span.Seconds(), float64(m-limit.Burst)/limit.Rate, limit.Burst, m-limit.Burst, limit.Rate)
		fmt.Fprintf(out, "  fleet rate   %.1f/s after the burst: %.0f%% of the limit of %g/s, for %d processes together (%.1f/s each)\n",
			steady, 100*steady/limit.Rate, limit.Rate, n, steady/float64(n))
	}
	lost := q.Archived + q.Pending + q.Scheduled + q.Retry + q.Active
	verdict := "nothing lost"
	if lost > 0 || len(seen) != jobs {
		verdict = "NOT ALL DONE"
	}
	fmt.Fprintf(out, "  queue        archived %d, pending %d, scheduled %d, retry %d, active %d: %s\n",
		q.Archived, q.Pending, q.Scheduled, q.Retry, q.Active, verdict)

	if err := removeQueue(rdb, insp, wf.queue, waitErr != nil); err != nil {
		fmt.Fprintf(out, "could not remove queue %s: %v\n", wf.queue, err)
	}
	switch {
	case waitErr != nil:
		return fmt.Errorf("stopped with %d of %d jobs done: %w", len(seen), jobs, waitErr)
	case verdict != "nothing lost":
		return errors.New("not every job ran")
	case !agree:
		return errors.New("a worker's processed count does not match the jobs it reported")
	case !exitedOK:
		return errors.New("a worker did not exit cleanly")
	}
	return nil
}

// startChild starts one worker process, reading its output in a goroutine
// that sends every job it reports to events.
func startChild(exe, redisURL string, wf workerFlags, events chan<- event) (*child, error) {
	cmd := exec.Command(exe, "-role", "worker", "-name", wf.name, "-queue", wf.queue, "-prefix", wf.prefix,
		"-concurrency", strconv.Itoa(wf.concurrency), "-max-wait", wf.maxWait.String())
	// The URL goes in the environment, not the arguments, where ps would show a password.
	cmd.Env = append(os.Environ(), "REDIS_URL="+redisURL)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", wf.name, err)
	}
	c := &child{name: wf.name, cmd: cmd, stdin: stdin, ready: make(chan struct{}), ended: make(chan struct{}), processed: -1}
	go func() {
		defer close(c.ended)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.handleLine(sc.Text(), events)
		}
		err := cmd.Wait()
		c.mu.Lock()
		c.exitErr = err
		c.mu.Unlock()
	}()
	return c, nil
}

func (c *child) handleLine(line string, events chan<- event) {
	f := strings.Fields(line)
	switch {
	case len(f) == 1 && f[0] == lineReady:
		close(c.ready)
	case len(f) == 3 && f[0] == lineJob:
		id, err1 := strconv.Atoi(f[1])
		us, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return
		}
		c.mu.Lock()
		c.jobs++
		c.mu.Unlock()
		select {
		case events <- event{child: c, id: id, at: time.UnixMicro(us)}:
		default: // the parent has stopped listening
		}
	case len(f) == 2 && f[0] == lineProcessed:
		n, err := strconv.Atoi(f[1])
		if err == nil {
			c.mu.Lock()
			c.processed = n
			c.mu.Unlock()
		}
	}
}

func (c *child) jobCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jobs
}

// stopChildren sends each worker SIGTERM and waits for it to exit, killing
// any that takes longer than 20 s. It may be called more than once.
func stopChildren(children []*child) {
	for _, c := range children {
		select {
		case <-c.ended:
		default:
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(20 * time.Second)
	for _, c := range children {
		select {
		case <-c.ended:
		case <-deadline:
			_ = c.cmd.Process.Kill()
			<-c.ended
		}
		c.stdin.Close()
	}
}

// redisForFleet returns the URL every process should use: REDIS_URL, or that
// of a miniredis started here, with a description and a func that stops it.
func redisForFleet() (url, where string, closeFn func(), err error) {
	if u := os.Getenv("REDIS_URL"); u != "" {
		opts, err := redis.ParseURL(u)
		if err != nil {
			return "", "", nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		return u, "Redis at " + opts.Addr + " (REDIS_URL)", func() {}, nil
	}
	mr, err := miniredis.Run()
	if err != nil {
		return "", "", nil, err
	}
	return "redis://" + mr.Addr(), "miniredis at " + mr.Addr() + ", in the parent process", mr.Close, nil
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
