package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/internal/httpjob"
	"github.com/sluicehq/sluice/internal/sleepjob"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

const (
	// shutdownSlack is what the pool's Shutdown gets beyond --shutdown-timeout:
	// asynq puts the jobs of unfinished handlers back after the timeout.
	shutdownSlack = 5 * time.Second
	// metricsShutdownTimeout bounds the last scrapes once the pool has stopped.
	metricsShutdownTimeout = 2 * time.Second
)

// run is the whole command, minus signal handling: ctx ends when the worker
// should stop, and context.Cause(ctx) says why. It returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args)
	if code, done := cli.Parsed(err, prog, usage, stdout, stderr); done {
		return code
	}
	limits, err := loadLimits(c.limits, c.limitsFile)
	if err != nil {
		return cli.Report(stderr, prog, err)
	}
	if err := checkTelemetryEnv(); err != nil {
		return cli.Report(stderr, prog, err)
	}
	rc, err := redisFromConfig(c)
	if err != nil {
		return cli.Report(stderr, prog, err)
	}
	handlers := builtinHandlers(c)
	idle, err := runnable(c, limits, handlers)
	if err != nil {
		return cli.Report(stderr, prog, err)
	}

	if errs := rc.ping(ctx); len(errs) > 0 {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "%s: interrupted before starting\n", prog)
			return cli.ExitInterrupted
		}
		for _, err := range errs {
			cli.Report(stderr, prog, err)
		}
		return cli.ExitFailure
	}
	log := newLogger(stderr, c)
	for _, t := range idle {
		handlers[t] = idleHandler(t, log)
	}
	warn(log, c, idle)
	return serve(ctx, c, rc, limits, handlers, log, stderr)
}

// serve runs the pool until ctx ends, then shuts it down.
func serve(ctx context.Context, c config, rc redisConfig, limits []limit, handlers map[string]asynq.Handler,
	log *slog.Logger, stderr io.Writer) int {
	tel, err := startTelemetry(ctx, c, log)
	if err != nil {
		return cli.Report(stderr, prog, err)
	}
	if tel.web != nil {
		tel.web.serve(log) // /healthz says 503 until the pool runs
	}
	m := tel.web
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), metricsShutdownTimeout)
		defer cancel()
		tel.shutdown(sctx)
	}()

	rdb := rc.limiter.Client()
	defer rdb.Close()
	store := throttle.NewRedisStore(rdb)
	defer store.Close()
	var hosts *workers.Hosts // --hosts auto: learned from asynq's heartbeats
	if c.failure == throttle.FailLocal && c.hostsAuto {
		var err error
		if hosts, err = workers.NewHosts(rc.queue.Asynq(), queueNames(c.queues)...); err != nil {
			return cli.Report(stderr, prog, err)
		}
		defer hosts.Close()
	}
	lim := throttle.NewLimiter(store, limiterOptions(c, rc, log, tel, hosts)...)

	pool, err := workers.NewPool(workers.Config{
		Redis:           rc.queue.Asynq(),
		Limiter:         lim,
		Concurrency:     c.concurrency,
		Queues:          c.queues,
		StrictPriority:  c.strictPriority,
		MaxWait:         c.maxWait,
		Horizon:         c.horizon,
		ShutdownTimeout: c.shutdownTimeout,
		Hosts:           hosts,
		Logger:          log,
		MeterProvider:   tel.meterProvider(),
		TracerProvider:  tel.tracerProvider(),
		// The worker logs its own status line, with rates and the limiter's mode.
	})
	if err != nil {
		return cli.Report(stderr, prog, cli.Usagef("%w", err))
	}
	rates := newRates(time.Now())
	register(pool, handlers, limits, rates)
	if err := observeShares(tel.meterProvider(), lim, rates); err != nil {
		log.Warn("telemetry: fair share gauges not registered", "err", err)
	}
	if err := observeAdaptive(tel.meterProvider(), lim, rates); err != nil {
		log.Warn("telemetry: adaptive rate gauges not registered", "err", err)
	}
	if err := observeFlight(tel.meterProvider(), lim, rates); err != nil {
		log.Warn("telemetry: in-flight bound gauges not registered", "err", err)
	}
	if err := pool.Start(); err != nil {
		shutdownPool(pool, c, log)
		return cli.Report(stderr, prog, err)
	}
	m.setHealthy(true)
	log.Info("worker started", "queues", c.queues, "concurrency", c.concurrency,
		"limits", len(limits), "failure_policy", c.failure.String(), "limiter_redis", cli.Redact(rc.limiterURL))

	statusCtx, stopStatus := context.WithCancel(context.Background())
	var status sync.WaitGroup
	rl := newRuntimeLimits(control.New(rdb, c.keyPrefix), pool, lim, rates, limits, c, log)
	status.Add(1)
	go func() {
		defer status.Done()
		rl.run(statusCtx)
	}()
	if c.historyStep > 0 {
		qrdb := rdb
		if !rc.same() {
			qrdb = rc.queue.Client()
			defer qrdb.Close()
		}
		s := newSampler(history.NewRing(rdb, c.keyPrefix, c.historyStep), pool, lim, rates, rl.current, qrdb, queueNames(c.queues), log)
		status.Add(1)
		go func() {
			defer status.Done()
			s.run(statusCtx)
		}()
	}
	if c.statusInterval > 0 {
		status.Add(1)
		go func() {
			defer status.Done()
			logStatus(statusCtx, log, c.statusInterval, pool, lim, rates)
		}()
	}

	<-ctx.Done()
	m.setHealthy(false)
	log.Info("worker stopping", "cause", context.Cause(ctx).Error())
	err = shutdownPool(pool, c, log)
	stopStatus()
	status.Wait()
	log.LogAttrs(context.Background(), slog.LevelInfo, "worker stopped",
		statusAttrs(pool.Stats(), rates.total(time.Now()), lim.Mode())...)
	if err != nil {
		return cli.Report(stderr, prog, err)
	}
	return cli.ExitOK
}

// shutdownPool shuts the pool down, giving it --shutdown-timeout and the
// time asynq takes to put unfinished jobs back.
func shutdownPool(pool *workers.Pool, c config, log *slog.Logger) error {
	limit := c.shutdownTimeout + shutdownSlack
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := pool.Shutdown(ctx); err != nil {
		log.Error("worker shutdown did not finish", "within", limit.String())
		return fmt.Errorf("shutdown did not finish within %v: a handler may be ignoring its context; "+
			"asynq will hand its job to another worker when its lease runs out", limit)
	}
	return nil
}

// limiterOptions are the Limiter's options from the flags: key prefix,
// failure policy (with the fleet's size under local), mode-change logging and
// the metrics.
// downMeans says what each mode of a Limiter whose store is down does.
var downMeans = map[string]string{
	throttle.ModeClosed:   "jobs go back to their queue until it answers (--failure-policy closed)",
	throttle.ModeOpen:     "jobs run with no limit until it answers (--failure-policy open)",
	throttle.ModeFallback: "each process takes its share of every limit until it answers (--failure-policy local)",
}

func limiterOptions(c config, rc redisConfig, log *slog.Logger, tel *telemetry, hosts *workers.Hosts) []throttle.Option {
	redisAttr := slog.String("redis", cli.Redact(rc.limiterURL))
	opts := []throttle.Option{
		throttle.WithKeyPrefix(c.keyPrefix),
		throttle.WithFailurePolicy(c.failure),
		throttle.WithMeterProvider(tel.meterProvider()),
		throttle.WithModeChange(func(mode string, err error) {
			if err != nil {
				log.Warn("limiter Redis down: "+downMeans[mode], redisAttr, slog.String("mode", mode), slog.Any("err", err))
				return
			}
			log.Info("limiter Redis back: jobs take their turns from the shared limits again", redisAttr, slog.String("mode", mode))
		}),
	}
	if c.prefetch > 0 {
		opts = append(opts, throttle.WithPrefetch(c.prefetch))
	}
	switch {
	case c.failure == throttle.FailLocal && hosts != nil:
		opts = append(opts, throttle.WithHosts(hosts.Hosts))
	case c.failure == throttle.FailLocal: // --hosts N, at least 1 (parseFlags)
		opts = append(opts, throttle.WithHosts(func() int { return c.hosts }))
	}
	return opts
}

// queueNames are the names of the queues this worker serves.
func queueNames(queues map[string]int) []string {
	names := make([]string, 0, len(queues))
	for q := range queues {
		names = append(names, q)
	}
	sort.Strings(names)
	return names
}

// builtinHandlers are the job types this binary runs, by task type.
func builtinHandlers(c config) map[string]asynq.Handler {
	return map[string]asynq.Handler{
		httpjob.TaskType:  &httpjob.Handler{Client: &http.Client{Timeout: c.httpTimeout}, Hosts: c.httpHosts},
		sleepjob.TaskType: asynq.HandlerFunc(sleepjob.Run),
	}
}

// register gives the pool each handler, under the policy of its type's
// limit if there is one, counted for the status line's rates.
func register(pool *workers.Pool, handlers map[string]asynq.Handler, limits []limit, r *rates) {
	byType := make(map[string]*workers.Policy, len(limits))
	for i := range limits {
		byType[limits[i].spec.Name] = &limits[i].spec.Policy
	}
	// Limited types first, in the order of the limits, so that the status
	// line lists them in that order.
	types := make([]string, 0, len(handlers))
	for t := range handlers {
		types = append(types, t)
	}
	sort.Strings(types)
	sort.SliceStable(types, func(i, j int) bool { return index(limits, types[i]) < index(limits, types[j]) })
	for _, t := range types {
		h, pol := handlers[t], byType[t]
		if pol != nil {
			h = r.counted(h, pol)
		}
		pool.Handle(t, h, pol)
	}
}

// index is the position of the limit for typ, or len(limits) if none.
func index(limits []limit, typ string) int {
	if i := slices.IndexFunc(limits, func(l limit) bool { return l.spec.Name == typ }); i >= 0 {
		return i
	}
	return len(limits)
}

// warn logs what is allowed but likely a mistake.
func warn(log *slog.Logger, c config, idle []string) {
	for _, w := range c.warnings {
		log.Warn(w)
	}
	for _, t := range idle {
		log.Info(fmt.Sprintf("type %s has no limit and no --unlimited: this worker does not run its jobs, which go back to their queue", t))
	}
	if c.failure == throttle.FailOpen {
		log.Warn("--failure-policy open: while the limiter Redis is down, jobs run with no limit at all")
	}
}

// newLogger returns the logger for --log-format and --log-level, writing to w.
func newLogger(w io.Writer, c config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.logLevel}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
