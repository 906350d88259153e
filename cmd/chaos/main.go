// Command chaos runs a fleet of sluice workers against a real Redis and a
// rate-limited upstream while it injects faults drawn from a seed, and then
// checks, from the upstream's own log and the queue, that no job was lost,
// none ran more often than at-least-once allows, no bucket granted beyond
// its limit, and none was archived.
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
)

const usage = `Usage: chaos [--seed N] [--duration D] [flags]

Runs a fleet of real sluice worker processes (built from ./cmd/worker) and a
redis-server of its own, with every feature on: per-tenant keys sharing a
global bucket by fair shares, adaptive limits learning from an upstream
emulator (a token bucket of its own, 429 + Retry-After beyond it, RateLimit
headers), runtime 'sluice set'/'unset', cooldowns, in-flight bounds and
prefetch. While three tenants' jobs flow, it injects faults drawn from the
seed:

  kill      SIGKILL a worker (its connections noted first), restart it later
  pause     SIGSTOP Redis, SIGCONT it later
  restart   SIGKILL Redis, start it again on its port (AOF, fsync always:
            nothing acknowledged is lost, so every loss counts)
  pubsub    CLIENT KILL TYPE pubsub
  flush     SCRIPT FLUSH
  storm     the upstream answers everything 429 with a Retry-After
  quota     the upstream's own quota moves, then comes back
  lower     sluice set a lower limit, unset it later
  raise     sluice set a higher limit, unset it later
  cooldown  sluice cooldown on one tenant's bucket

Then it heals every fault, waits for the queue to drain, stops the fleet,
and checks:

  lost          every enqueued job was answered 200 by the upstream or is
                still in one of asynq's states (pending, active, scheduled,
                retry, archived, completed)
  runs          a job ran (was answered 200) again only after the worker that
                ran it was SIGKILLed before asynq heard it was done
  grants        in no span did the upstream receive more requests than the
                burst + rate*t of the highest limit in force then (global
                bucket and each tenant's), beyond a jitter allowance
  in-flight     no tenant had more requests in progress than in-flight=
  pauses        no request arrived during a Retry-After or a cooldown
  archived      no job was archived (each is listed with asynq's LastErr)

and prints a summary. The fault schedule and the workload are drawn from
the seed alone (with --duration, --workers, --faults and --fault-gap), and
printed first; the fleet's own timing is not, so two runs of a seed differ
in detail. See docs/reliability.md.

Flags:
  --seed N            the seed of the fault schedule and the workload (default 1)
  --duration D        how long jobs are enqueued and faults injected (default 1m;
                      at least 10s)
  --drain D           then, how long to wait for the queue to empty (default 2m:
                      asynq recovers a killed worker's jobs 1 to 2 minutes after)
  --workers N         worker processes, 2 to 16 (default 4)
  --concurrency N     jobs at once per worker (default 8)
  --prefetch N        --prefetch of every other worker, 0 to 255 (default 4)
  --rate R            jobs enqueued per second, on average, 1 to 1000 (default 20)
  --fault-gap D       mean time between faults (default 4s)
  --faults LIST       the faults to draw from, comma-separated, or all or none
                      (default all)
  --bin DIR           take the worker and sluice binaries from DIR instead of
                      building them (go build, from the sluice module)
  --logs DIR          keep the workers' logs, the upstream's log and Redis's
                      there (default: a temporary directory, removed when every
                      check passes, kept and named otherwise)
  --quiet             print the summary only, not the schedule and progress
  --version           print the version and exit

Examples:
  go run ./cmd/chaos --seed 7 --duration 10m
  go run ./cmd/chaos --seed 3 --duration 2m --faults kill,restart --logs /tmp/chaos

Exit status: 0 every check passed, 1 a check failed, 2 bad usage,
3 the run itself could not be made (Redis would not start, a build failed).
`

// exitRunFailed is the exit status when the run could not be made.
const exitRunFailed = 3

// config is what the flags ask for.
type config struct {
	seed        uint64
	duration    time.Duration
	drain       time.Duration
	workers     int
	concurrency int
	prefetch    int
	rate        float64
	faultGap    time.Duration
	faults      []faultKind
	bin         string
	logs        string
	quiet       bool
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args)
	if code, done := cli.Parsed(err, "chaos", usage, stdout, stderr); done {
		return code
	}
	rep, err := runChaos(cfg, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return exitRunFailed
	}
	if !rep.ok() {
		return cli.ExitFailure
	}
	return cli.ExitOK
}

// parseFlags reads the command line (not the environment): flag.ErrHelp for
// --help, cli.ErrVersion for --version, a bad flag an error matching
// cli.ErrUsage.
func parseFlags(args []string) (config, error) {
	fs := cli.NewFlags("chaos")
	fs.NoEnv = true
	seed := fs.String("seed", "1", "")
	duration := fs.Duration("duration", time.Minute, "")
	drain := fs.Duration("drain", 2*time.Minute, "")
	workers := fs.Int("workers", 4, "")
	concurrency := fs.Int("concurrency", 8, "")
	prefetch := fs.Int("prefetch", 4, "")
	rate := fs.Float64("rate", 20, "")
	gap := fs.Duration("fault-gap", 4*time.Second, "")
	faults := fs.String("faults", "all", "")
	bin := fs.String("bin", "", "")
	logs := fs.String("logs", "", "")
	quiet := fs.Bool("quiet", false, "")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if err := fs.NoArgs(); err != nil {
		return config{}, err
	}
	cfg := config{
		duration: *duration, drain: *drain, workers: *workers, concurrency: *concurrency,
		prefetch: *prefetch, rate: *rate, faultGap: *gap, bin: *bin, logs: *logs, quiet: *quiet,
	}
	var err error
	if cfg.seed, err = strconv.ParseUint(*seed, 10, 64); err != nil {
		return cfg, cli.Usagef("--seed %q: want a whole number from 0 to %d", *seed, uint64(1<<64-1))
	}
	if cfg.faults, err = kindsOf(*faults); err != nil {
		return cfg, cli.Usagef("%v", err)
	}
	for _, c := range []struct {
		ok   bool
		what string
	}{
		{cfg.duration >= 10*time.Second && cfg.duration <= 24*time.Hour, "--duration " + cfg.duration.String() + ": want 10s to 24h"},
		{cfg.drain >= 0 && cfg.drain <= time.Hour, "--drain " + cfg.drain.String() + ": want 0 to 1h"},
		{cfg.workers >= 2 && cfg.workers <= 16, "--workers " + strconv.Itoa(cfg.workers) + ": want 2 to 16"},
		{cfg.concurrency >= 1 && cfg.concurrency <= 200, "--concurrency " + strconv.Itoa(cfg.concurrency) + ": want 1 to 200"},
		{cfg.prefetch >= 0 && cfg.prefetch <= 255, "--prefetch " + strconv.Itoa(cfg.prefetch) + ": want 0 to 255"},
		{cfg.rate >= 1 && cfg.rate <= 1000, "--rate " + strconv.FormatFloat(cfg.rate, 'g', -1, 64) + ": want 1 to 1000"},
		{cfg.faultGap >= 100*time.Millisecond && cfg.faultGap <= time.Hour, "--fault-gap " + cfg.faultGap.String() + ": want 100ms to 1h"},
	} {
		if !c.ok {
			return cfg, cli.Usagef("%s", c.what)
		}
	}
	return cfg, nil
}

// splitList splits a comma-separated list, trimming spaces and dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
