// Command load measures sluice's throttle against a real Redis and prints each
// figure beside a reference measured in the same run.
//
//	go run ./cmd/load                 # starts its own redis-server on a free port
//	go run ./cmd/load --redis redis://127.0.0.1:6379/0 --duration 10s
//
// Figures: round trips per granted Acquire (64 goroutines, one bucket at
// 200/s burst 20) against an Allow-then-sleep loop; tokens granted against
// Burst + Rate·T with over-grants counted; Jain's fairness index; lateness of
// woken waiters; TryAcquire throughput against a trivial EVALSHA through the
// same client; the memory store's TryAcquire; MEMORY USAGE of an idle bucket.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

type config struct {
	redisURL string
	duration time.Duration
	workers  int
	rate     float64
	burst    int
	tryers   int
	tryFor   time.Duration

	hotWorkers int
	hotFor     time.Duration
	hotRate    float64
	hotBurst   int
	costFor    time.Duration
	only       string // one group of figures: basic, hot, cost or pool; "" all

	poolJobs        int
	poolConcurrency int

	// A child of the hot-key experiments (hot.go): its experiment, start
	// (Unix ns) and key prefix.
	child       string
	childStart  int64
	childPrefix string
}

// parseFlags reads and checks args: flag.ErrHelp for --help, cli.ErrVersion
// for --version, errors matching cli.ErrUsage otherwise.
func parseFlags(args []string) (config, error) {
	fs := cli.NewFlags(prog)
	var c config
	fs.StringVar(&c.redisURL, "redis", "", "")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "")
	fs.IntVar(&c.workers, "workers", 64, "")
	fs.Float64Var(&c.rate, "rate", 200, "")
	fs.IntVar(&c.burst, "burst", 20, "")
	fs.IntVar(&c.tryers, "tryers", 32, "")
	fs.DurationVar(&c.tryFor, "try-duration", 3*time.Second, "")
	fs.IntVar(&c.hotWorkers, "hot-workers", 64, "")
	fs.DurationVar(&c.hotFor, "hot-duration", 5*time.Second, "")
	fs.Float64Var(&c.hotRate, "hot-rate", 400_000, "")
	fs.IntVar(&c.hotBurst, "hot-burst", 4000, "")
	fs.DurationVar(&c.costFor, "cost-duration", 500*time.Millisecond, "")
	fs.StringVar(&c.only, "only", "", "")
	fs.IntVar(&c.poolJobs, "pool-jobs", 10_000, "")
	fs.IntVar(&c.poolConcurrency, "pool-concurrency", 32, "")
	fs.StringVar(&c.child, "child", "", "")
	fs.Int64Var(&c.childStart, "child-start", 0, "")
	fs.StringVar(&c.childPrefix, "child-prefix", "", "")
	fs.Fallback("redis", "REDIS_URL")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if err := fs.NoArgs(); err != nil {
		return config{}, err
	}
	switch {
	case c.duration < time.Second:
		return config{}, cli.Usagef("--duration %v must be at least 1s", c.duration)
	case c.workers < 1:
		return config{}, cli.Usagef("--workers %d must be at least 1", c.workers)
	case !(c.rate > 0):
		return config{}, cli.Usagef("--rate %g must be positive", c.rate)
	case c.burst < 1:
		return config{}, cli.Usagef("--burst %d must be at least 1", c.burst)
	case c.tryers < 1:
		return config{}, cli.Usagef("--tryers %d must be at least 1", c.tryers)
	case c.tryFor <= 0:
		return config{}, cli.Usagef("--try-duration %v must be positive", c.tryFor)
	case c.hotWorkers < 1:
		return config{}, cli.Usagef("--hot-workers %d must be at least 1", c.hotWorkers)
	case c.hotFor < 100*time.Millisecond:
		return config{}, cli.Usagef("--hot-duration %v must be at least 100ms", c.hotFor)
	case !(c.hotRate > 0) || c.hotRate > 1e6:
		return config{}, cli.Usagef("--hot-rate %g must be positive and at most 1000000", c.hotRate)
	case c.hotBurst < 1:
		return config{}, cli.Usagef("--hot-burst %d must be at least 1", c.hotBurst)
	case c.only != "" && c.only != "basic" && c.only != "hot" && c.only != "cost" && c.only != "pool":
		return config{}, cli.Usagef("--only %q: want basic, hot, cost or pool", c.only)
	case c.poolJobs < 1:
		return config{}, cli.Usagef("--pool-jobs %d must be at least 1", c.poolJobs)
	case c.poolConcurrency < 1:
		return config{}, cli.Usagef("--pool-concurrency %d must be at least 1", c.poolConcurrency)
	case c.costFor <= 0:
		return config{}, cli.Usagef("--cost-duration %v must be positive", c.costFor)
	}
	return c, nil
}

func main() {
	cli.Main(prog, "", func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	})
}

const prog = "load"

const usage = `Usage: load [flags]

Measures sluice's throttle against a real Redis and prints each figure beside
a reference measured in the same run (see docs/benchmarks.md): round trips per
grant, tokens granted against Burst + Rate*T, fairness, lateness, TryAcquire
throughput against a trivial EVALSHA, the memory store, an idle bucket's size;
one hot key from two processes (this one and a copy of itself) against the raw
one-key EVALSHA ceiling and go-redis/redis_rate; the server's CPU per decision
of each policy against redis_rate's (INFO commandstats; five pairs of runs,
the median ratio, and redis_rate against itself to show the noise; a
redis-server this command started runs that group on a CPU of its own, Linux
only); no-op jobs per second
through a workers.Pool (its limiter on Redis coalesced, not, or prefetching;
or in process) against a plain asynq server.

Flags:
  --redis URL            Redis to measure against (default $REDIS_URL; if neither,
                         a redis-server from PATH is started on a free port)
  --duration D           how long each Acquire experiment runs, at least 1s (default 10s)
  --workers N            goroutines contending for one bucket (default 64)
  --rate R               bucket rate per second (default 200)
  --burst N              bucket burst (default 20)
  --tryers N             goroutines in the TryAcquire throughput experiment (default 32)
  --try-duration D       how long each throughput experiment runs (default 3s)
  --hot-workers N        goroutines per process on the hot key (default 64)
  --hot-duration D       how long each hot-key experiment runs (default 5s)
  --hot-rate R           the hot key's rate per second (default 400000)
  --hot-burst N          the hot key's burst (default 4000)
  --cost-duration D      how long each server-cost run lasts (default 500ms)
  --pool-jobs N          no-op jobs per run of the pool group (default 10000)
  --pool-concurrency N   workers in the pool group (default 32)
  --only GROUP           measure one group of figures: basic, hot, cost or pool
                         (default: all four)
  --version              print the version and exit

Environment:
  Every flag may come from SLUICE_<FLAG> (SLUICE_TRY_DURATION for --try-duration);
  a flag given wins over its variable.

Example:
  load --duration 5s --workers 128

Figures go to stdout, progress to stderr. Exit status: 0 measured, 1 runtime
failure (no Redis), 2 bad usage.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args)
	if code, done := cli.Parsed(err, prog, usage, stdout, stderr); done {
		return code
	}

	if c.child != "" {
		return runChild(ctx, c, stdout)
	}
	opt, url, server, stopServer, err := redisOptions(c.redisURL, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "load:", err)
		return 1
	}
	defer stopServer()
	counter := &roundTrips{}
	rdb := redis.NewClient(opt)
	rdb.AddHook(counter)
	defer rdb.Close()
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err = rdb.Ping(pctx).Err()
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "load: cannot reach Redis at %s: %v\n", opt.Addr, err)
		return 1
	}

	rep := &report{}
	if c.only == "" || c.only == "basic" {
		rep, err = measure(ctx, c, rdb, counter, stderr)
	}
	if err == nil && (c.only == "" || c.only == "hot") {
		rep.hot, err = hot(ctx, c, url, stderr)
	}
	if err == nil && (c.only == "" || c.only == "pool") {
		rep.pool, err = poolRates(ctx, c, url, stderr)
	}
	if err == nil && (c.only == "" || c.only == "cost") {
		rep.cost, err = pinnedCost(ctx, c, rdb, server, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "load:", err)
		return 1
	}
	rep.print(stdout, c)
	return 0
}

// pinnedCost is serverCost with redis-server's command thread (process
// server; 0: not ours) on a CPU of its own and this process on the others
// (pinApart), when there are two or more CPUs: measured here, the ratio of
// redis_rate's own script to itself strayed to 0.85-1.62 over five pairs of
// runs sharing the CPUs, and 0.99-1.02 pinned apart.
func pinnedCost(ctx context.Context, c config, rdb *redis.Client, server int, stderr io.Writer) ([]costRow, error) {
	undo, err := pinApart(server)
	if err != nil {
		fmt.Fprintf(stderr, "load: cannot pin redis-server and this process apart (%v); measuring anyway\n", err)
		undo = func() {}
	} else if server != 0 && runtime.NumCPU() >= 2 {
		fmt.Fprintln(stderr, "load: server cost: redis-server pinned to a CPU of its own, this process to the others")
	}
	defer undo()
	return serverCost(ctx, c, rdb, c.costFor, stderr)
}

// redisOptions parses url, or starts a redis-server when url is empty; it
// returns the URL it used and the server's process id (0 for a url).
func redisOptions(url string, stderr io.Writer) (*redis.Options, string, int, func(), error) {
	if url == "" {
		srv, err := redistest.Launch()
		if err != nil {
			return nil, "", 0, nil, fmt.Errorf("no --redis or REDIS_URL, and starting redis-server failed: %w", err)
		}
		fmt.Fprintf(stderr, "load: started redis-server on %s\n", srv.Addr())
		url = srv.URL()
		opt, err := redis.ParseURL(url)
		if err != nil {
			srv.Stop()
			return nil, "", 0, nil, err
		}
		opt.ContextTimeoutEnabled = true
		opt.PoolSize = 128
		return opt, url, srv.Pid(), srv.Stop, nil
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, "", 0, nil, fmt.Errorf("bad --redis %q: %w", redact(url), err)
	}
	opt.ContextTimeoutEnabled = true
	opt.PoolSize = 128
	return opt, url, 0, func() {}, nil
}

func redact(url string) string {
	if i := strings.Index(url, "@"); i >= 0 {
		if j := strings.Index(url, "://"); j >= 0 && j < i {
			return url[:j+3] + "…" + url[i:]
		}
	}
	return url
}

func (r *report) print(w io.Writer, c config) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\tsluice\treference (same run)\ttarget\t\n")
	if r.basic {
		fmt.Fprintf(tw, "round trips per grant (%d goroutines, %g/s burst %d)\t%.3f\t%.1f (Allow, sleep RetryAfter, retry)\t<= 1.02\t%s\n",
			c.workers, c.rate, c.burst, r.rtPerGrant, r.refRTPerGrant, verdict(r.rtPerGrant <= 1.02))
		fmt.Fprintf(tw, "tokens granted over %v vs Burst + Rate*T\t%.2f%% (%d of %.0f), %d over-grants\t%.2f%%, %d over-grants\t>= 99.5%%, 0 over\t%s\n",
			c.duration, r.utilisation*100, r.granted, r.allowed, r.overGrants, r.refUtilisation*100, r.refOverGrants, verdict(r.utilisation >= 0.995 && r.overGrants == 0))
		fmt.Fprintf(tw, "fairness (Jain's index over %d goroutines)\t%.4f\t%.4f\t>= 0.99\t%s\n", c.workers, r.jain, r.refJain, verdict(r.jain >= 0.99))
		fmt.Fprintf(tw, "lateness past the slot, p50 / p99 / max\t%v / %v / %v\t-\tp99 <= 2ms\t%s\n",
			r.lateP50.Round(time.Microsecond), r.lateP99.Round(time.Microsecond), r.lateMax.Round(time.Microsecond), verdict(r.lateP99 <= 2*time.Millisecond))
		fmt.Fprintf(tw, "TryAcquire throughput, %d goroutines, one key\t%.0f/s\t%.0f/s (trivial EVALSHA), ratio %.3f\t>= 0.95x\t%s\n",
			c.tryers, r.tryPerSec, r.evalPerSec, r.tryPerSec/r.evalPerSec, verdict(r.tryPerSec/r.evalPerSec >= 0.95))
		fmt.Fprintf(tw, "memory store TryAcquire, uncontended\t%.1f ns/op, %d allocs/op\t-\t<= 150 ns, 0 allocs\t%s\n",
			r.memNs, r.memAllocs, verdict(r.memNs <= 150 && r.memAllocs == 0))
		fmt.Fprintf(tw, "MEMORY USAGE of an idle bucket (%s)\t%d bytes, TTL %v\t-\t<= 100 bytes, TTL set\t%s\n",
			r.idleKey, r.idleBytes, r.idleTTL.Round(time.Millisecond), verdict(r.idleBytes <= 100 && r.idleTTL > 0))
	}
	if eval, ok := r.hot["eval"]; ok {
		rr, single, co := r.hot["redis_rate"], r.hot["single"], r.hot["coalesced"]
		hk := fmt.Sprintf("2 processes × %d goroutines, one key, %g/s burst %d", c.hotWorkers, c.hotRate, c.hotBurst)
		// T is Period/Rate rounded up to a picosecond: a bucket never grants
		// faster than asked, and says so if it grants measurably slower.
		burst, refill := throttle.QuotaOf(throttle.Limit{Rate: c.hotRate, Period: time.Second, Burst: c.hotBurst})
		if own := float64(burst) / refill.Seconds(); own < 0.999*c.hotRate {
			hk += fmt.Sprintf(", which grants %.0f/s", own)
		}
		fmt.Fprintf(tw, "hot key: Acquire grants/s (%s)\t%.0f/s, %.1fx the EVALSHA ceiling, %.2fx redis_rate\t%.0f/s raw one-key EVALSHA; redis_rate Allow %.0f/s; uncoalesced Acquire %.0f/s\t>= 3x EVALSHA\t%s\n",
			hk, co.grantsPerSec, co.grantsPerSec/eval.callsPerSec, co.grantsPerSec/rr.grantsPerSec, eval.callsPerSec, rr.grantsPerSec, single.grantsPerSec, verdict(co.grantsPerSec >= 3*eval.callsPerSec))
		fmt.Fprintf(tw, "hot key: round trips per grant\t%.4f\t%.3f (redis_rate), %.3f (uncoalesced)\t<= 0.1\t%s\n",
			co.tripsPerGrant, rr.tripsPerGrant, single.tripsPerGrant, verdict(co.tripsPerGrant <= 0.1))
		fmt.Fprintf(tw, "hot key: most grants beyond Burst + Rate*t, both processes\t%d\t%d (redis_rate), %d (uncoalesced)\t0\t%s\n",
			co.over, rr.over, single.over, verdict(co.over <= 0))
	}
	if r.pool.asynq > 0 {
		fmt.Fprintf(tw, "no-op jobs/s through a workers.Pool (%d workers, limit never denies)\t%.0f/s (%.2fx); uncoalesced %.0f/s (%.2fx); limiter in process %.0f/s (%.2fx)\t%.0f/s (plain asynq server)\t>= 0.95x\t%s\n",
			c.poolConcurrency, r.pool.pool, r.pool.pool/r.pool.asynq, r.pool.poolSingle, r.pool.poolSingle/r.pool.asynq,
			r.pool.poolMemory, r.pool.poolMemory/r.pool.asynq, r.pool.asynq, verdict(r.pool.pool >= 0.95*r.pool.asynq))
		fmt.Fprintf(tw, "the same with throttle.WithPrefetch(%d)\t%.0f/s (%.2fx)\t%.0f/s (plain asynq server)\t>= 0.95x\t%s\n",
			c.poolConcurrency, r.pool.poolPrefetch, r.pool.poolPrefetch/r.pool.asynq, r.pool.asynq, verdict(r.pool.poolPrefetch >= 0.95*r.pool.asynq))
	}
	for _, row := range r.cost {
		if row.name == controlRow {
			fmt.Fprintf(tw, "the same for redis_rate Allow against itself (the noise in the ratios above)\t%.2f µs (%.2fx, pairs %.2f-%.2fx)\t%.2f µs\t-\t-\n",
				row.single, row.ratio, row.lo, row.hi, row.peer)
			continue
		}
		target := 1.0
		if row.name == "SlidingLog" || row.name == "SlidingWindow" {
			target = 1.5
		}
		fmt.Fprintf(tw, "server µs per decision, %s (TryAcquire, %d goroutines, median of %d pairs)\t%.2f µs (%.2fx, pairs %.2f-%.2fx), coalesced %.2f µs\t%.2f µs (redis_rate Allow)\t<= %.1fx\t%s\n",
			row.name, c.tryers, costRounds, row.single, row.ratio, row.lo, row.hi, row.coalesced, row.peer, target, verdict(row.ratio <= target))
	}
	tw.Flush()
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}
