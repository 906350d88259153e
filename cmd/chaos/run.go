package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
)

// keyPrefix is the limiter's key prefix in the run's Redis.
const keyPrefix = "chaos:"

// queueName is the asynq queue every job goes to: the workers' default.
const queueName = "default"

// runState is one run: its processes, servers and what it recorded.
type runState struct {
	cfg   config
	base  bounds
	start time.Time
	out   io.Writer
	outMu sync.Mutex

	srv   *redistest.Server
	rdb   *redis.Client
	insp  *asynq.Inspector
	up    *upstream
	fleet []*worker
	cli   sluiceCLI
	probe *jitterProbe
	enq   *enqueuer
	rec   record
}

// say prints a line of the run's progress, stamped with the time since the start.
func (r *runState) say(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	now := time.Now()
	r.rec.add(func(rec *record) { rec.events = append(rec.events, eventLine{now, text}) })
	if r.cfg.quiet {
		return
	}
	r.outMu.Lock()
	defer r.outMu.Unlock()
	fmt.Fprintf(r.out, "  %9s  %s\n", "+"+fmtDur(now.Sub(r.start)), text)
}

// runChaos makes one run and prints its report to out. An error means the
// run could not be made; a failed check is in the report.
func runChaos(cfg config, out io.Writer) (*report, error) {
	base, err := boundsOf(baseSpec)
	if err != nil {
		return nil, err
	}
	r := &runState{cfg: cfg, base: base, out: out, start: time.Now()}
	plan := planFaults(cfg.seed, cfg.duration, cfg.workers, cfg.faults, cfg.faultGap)

	logs := cfg.logs
	if logs == "" {
		if logs, err = os.MkdirTemp("", "sluice-chaos-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	binDir, err := os.MkdirTemp("", "sluice-chaos-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(binDir)
	if !cfg.quiet {
		fmt.Fprintf(out, "chaos: seed %d, %v of faults, then up to %v to drain; building the binaries...\n", cfg.seed, cfg.duration, cfg.drain)
	}
	bins, err := buildBinaries(binDir, cfg.bin)
	if err != nil {
		return nil, err
	}

	if r.srv, r.rdb, err = startRedis(); err != nil {
		return nil, err
	}
	defer r.srv.Stop()
	defer r.rdb.Close()
	r.insp = asynq.NewInspectorFromRedisClient(r.rdb)
	if r.up, err = startUpstream(upstreamQuota); err != nil {
		return nil, err
	}
	defer r.up.Close()
	r.cli = sluiceCLI{bin: bins.sluice, redisURL: r.srv.URL(), prefix: keyPrefix}
	r.probe = startJitterProbe()
	defer r.probe.Stop()
	if err := r.startFleet(bins.worker, logs); err != nil {
		r.stopFleet()
		return nil, err
	}

	if !cfg.quiet {
		r.header(plan)
	}
	r.start = time.Now()
	r.chaos(plan)
	r.heal()
	r.drain()
	r.stopFleet()

	rep, err := r.report()
	if err != nil {
		return nil, err
	}
	rep.print(out)
	if werr := r.writeLogs(logs, rep); werr != nil {
		fmt.Fprintf(out, "chaos: writing the logs: %v\n", werr)
	}
	switch {
	case cfg.logs != "":
		fmt.Fprintf(out, "logs in %s\n", logs)
	case rep.ok():
		_ = os.RemoveAll(logs)
	default:
		fmt.Fprintf(out, "logs kept in %s\n", logs)
	}
	return rep, nil
}

// startFleet starts the workers and waits until asynq lists each.
func (r *runState) startFleet(bin, logs string) error {
	for i := range r.cfg.workers {
		args := []string{
			"--redis", r.srv.URL(), "--key-prefix", keyPrefix, "--log-format", "json",
			"--concurrency", strconv.Itoa(r.cfg.concurrency), "--limit", baseSpec,
			"--status-interval", "5s", "--shutdown-timeout", "10s", "--http-timeout", "10s",
		}
		if i%2 == 1 && r.cfg.prefetch > 0 {
			args = append(args, "--prefetch", strconv.Itoa(r.cfg.prefetch))
		}
		name := fmt.Sprintf("worker%d", i+1)
		w := &worker{name: name, bin: bin, args: args, log: filepath.Join(logs, name+".log")}
		r.fleet = append(r.fleet, w)
		if err := w.Start(); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		servers, _ := r.insp.Servers()
		up := make(map[int]bool)
		for _, s := range servers {
			up[s.PID] = true
		}
		missing := ""
		for _, w := range r.fleet {
			if !up[w.Pid()] {
				missing += " " + w.name
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("workers not registered with asynq after 20s:%s (see %s)", missing, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// header prints what the run is made of and its schedule.
func (r *runState) header(plan []fault) {
	fmt.Fprintf(r.out, "redis: %s, AOF with appendfsync always (a restart loses nothing acknowledged)\n", r.srv.Addr())
	fmt.Fprintf(r.out, "upstream: %s, %g/s burst %d of its own, 429 + Retry-After beyond, RateLimit headers\n",
		r.up.ln.Addr(), upstreamQuota, upstreamBurst)
	fmt.Fprintf(r.out, "fleet: %d workers x %d slots, --prefetch %d on every other one, --limit '%s'\n",
		r.cfg.workers, r.cfg.concurrency, r.cfg.prefetch, baseSpec)
	fmt.Fprintf(r.out, "workload: %g jobs/s on average, tenants", r.cfg.rate)
	for _, tn := range tenants {
		fmt.Fprintf(r.out, " %s %.0f%%", tn.name, 100*tn.share)
	}
	fmt.Fprintf(r.out, ", bursts of 50-150; every third job MaxRetry 0\n")
	fmt.Fprintf(r.out, "fault schedule (from --seed %d, --duration %v, --workers %d, --faults %s, --fault-gap %v):\n",
		r.cfg.seed, r.cfg.duration, r.cfg.workers, joinKinds(r.cfg.faults), r.cfg.faultGap)
	printPlan(r.out, plan)
	fmt.Fprintln(r.out, "run:")
}

// chaos enqueues the workload and injects the faults for the run's duration,
// and returns once the faults begun are over.
func (r *runState) chaos(plan []fault) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.duration)
	defer cancel()
	r.enq = newEnqueuer(r.rdb, r.up)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); r.enq.run(ctx, r.cfg.seed, r.cfg.rate) }()
	in := &injector{r: r}
	go func() { defer wg.Done(); in.run(ctx, plan) }()
	go func() { defer wg.Done(); r.progress(ctx) }()
	wg.Wait()
	r.say("faults over; waiting for the last recoveries")
	in.Wait()
}

// heal undoes what a failed recovery may have left: a runtime limit still
// set, a worker not running, the upstream's quota moved.
func (r *runState) heal() {
	r.rec.mu.Lock()
	n := len(r.rec.limits)
	dirty := n > 0 && (r.rec.limits[n-1].Failed || r.rec.limits[n-1].Bounds.spec != baseSpec)
	r.rec.mu.Unlock()
	if dirty {
		(&injector{r: r}).setLimit("")
	}
	for _, w := range r.fleet {
		if w.Pid() == 0 {
			if err := w.Restart(); err != nil {
				r.say("restart %s: %v", w.name, err)
			}
		}
	}
	r.up.SetQuota(upstreamQuota)
}

// drain waits until the queue holds nothing pending, active, scheduled or
// retrying, or the drain time is up.
func (r *runState) drain() {
	r.say("draining (up to %v)", r.cfg.drain)
	deadline := time.Now().Add(r.cfg.drain)
	last := time.Now()
	for {
		qi, err := r.insp.GetQueueInfo(queueName)
		if errors.Is(err, asynq.ErrQueueNotFound) || err == nil && qi.Pending+qi.Active+qi.Scheduled+qi.Retry == 0 {
			r.say("drained")
			return
		}
		if time.Now().After(deadline) {
			r.say("not drained after %v: %s", r.cfg.drain, r.queueLine())
			return
		}
		if time.Since(last) >= 10*time.Second {
			last = time.Now()
			r.say("draining: %s", r.queueLine())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// stopFleet stops every worker with SIGTERM, at once, as a deploy would.
func (r *runState) stopFleet() {
	var wg sync.WaitGroup
	for _, w := range r.fleet {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if clean, err := w.Stop(20 * time.Second); err != nil || !clean {
				r.say("stop %s: clean=%v %v", w.name, clean, err)
			}
		}()
	}
	wg.Wait()
}

// progress prints a line of figures every few seconds until ctx ends.
func (r *runState) progress(ctx context.Context) {
	every := 10 * time.Second
	if r.cfg.duration < time.Minute {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			all, ok := r.up.Count()
			r.say("enqueued %d; upstream %d requests, %d answered 200; %s", r.enq.Count(), all, ok, r.queueLine())
		}
	}
}

// queueLine is the queue's counts, or why they cannot be read now.
func (r *runState) queueLine() string {
	qi, err := r.insp.GetQueueInfo(queueName)
	if err != nil {
		return "queue unreadable now (" + err.Error() + ")"
	}
	return fmt.Sprintf("queue: pending %d, active %d, scheduled %d, retry %d, archived %d",
		qi.Pending, qi.Active, qi.Scheduled, qi.Retry, qi.Archived)
}
