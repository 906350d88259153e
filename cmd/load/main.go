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
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
)

type config struct {
	redisURL string
	duration time.Duration
	workers  int
	rate     float64
	burst    int
	tryers   int
	tryFor   time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.StringVar(&c.redisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL (default $REDIS_URL; if empty, a redis-server from PATH is started on a free port)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long each Acquire experiment runs")
	fs.IntVar(&c.workers, "workers", 64, "goroutines contending for one bucket")
	fs.Float64Var(&c.rate, "rate", 200, "bucket rate per second")
	fs.IntVar(&c.burst, "burst", 20, "bucket burst")
	fs.IntVar(&c.tryers, "tryers", 32, "goroutines in the TryAcquire throughput experiment")
	fs.DurationVar(&c.tryFor, "try-duration", 3*time.Second, "how long each throughput experiment runs")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: load [flags]\n\nMeasures sluice's throttle against a real Redis; see the README's figures table.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if c.duration < time.Second || c.workers < 1 || c.rate <= 0 || c.burst < 1 || c.tryers < 1 || c.tryFor <= 0 {
		fmt.Fprintln(stderr, "load: --duration must be at least 1s; --workers, --rate, --burst, --tryers and --try-duration positive")
		return 2
	}

	opt, stopServer, err := redisOptions(c.redisURL, stderr)
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

	rep, err := measure(ctx, c, rdb, counter, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "load:", err)
		return 1
	}
	rep.print(stdout, c)
	return 0
}

// redisOptions parses url, or starts a redis-server when url is empty.
func redisOptions(url string, stderr io.Writer) (*redis.Options, func(), error) {
	if url == "" {
		srv, err := redistest.Launch()
		if err != nil {
			return nil, nil, fmt.Errorf("no --redis or REDIS_URL, and starting redis-server failed: %w", err)
		}
		fmt.Fprintf(stderr, "load: started redis-server on %s\n", srv.Addr())
		url = srv.URL()
		opt, err := redis.ParseURL(url)
		if err != nil {
			srv.Stop()
			return nil, nil, err
		}
		opt.ContextTimeoutEnabled = true
		opt.PoolSize = 128
		return opt, srv.Stop, nil
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, nil, fmt.Errorf("bad --redis %q: %w", redact(url), err)
	}
	opt.ContextTimeoutEnabled = true
	opt.PoolSize = 128
	return opt, func() {}, nil
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
	tw.Flush()
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}
