package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/limitspec"
	"github.com/sluicehq/sluice/throttle"
)

const prog = "worker"

// maxKeyPrefix bounds --key-prefix, as throttle.WithKeyPrefix does.
const maxKeyPrefix = 128

const usage = `Usage: worker [flags]

Runs sluice jobs from asynq queues in Redis, taking each job's tokens from
buckets the whole fleet shares before its handler runs. A job whose turn is
further off than its wait budget goes back to its queue to come back at its
turn; an upstream 429/503 pauses the job's bucket on every host.

This binary runs two job types:
  http:request  one HTTP request; payload
                {"url": "...", "method": "POST", "headers": {"K": "V"}, "body": "..."}
  sleep         waits, for demos and tests; payload {"ms": N}, N from 0 to 600000;
                other fields are ignored, so a key template may read them

Flags:
  --redis URL              queue Redis (default $REDIS_URL):
                           redis://[USER:PASSWORD@]HOST[:PORT][/DB], or rediss:// for TLS;
                           a Redis Cluster: redis-cluster://HOST:PORT,HOST:PORT,...
                           behind Sentinel: redis-sentinel://HOST:PORT,...[/DB]?master=NAME
                           (USER:PASSWORD@ before the hosts; rediss-... for TLS)
  --limiter-redis URL      limiter Redis, if not the queue Redis (default: --redis),
                           in the same forms
  --concurrency N          jobs at once in this process, waiting ones included (default 10)
  --prefetch N             book up to N more grants with each limiter call, for the jobs
                           that follow within 1-20 ms (a 64th of the time the limit takes
                           to refill its burst; 0 to 255, default 0: off), only while the
                           bucket stays at least half full; for limits that seldom bind:
                           grants not taken in time are given back unless another
                           booking stands on them (then lost to the fleet)
  --limit SPEC             a limit, repeatable:
                           TYPE=RATE/UNIT[,name=NAME][,policy=P][,zone=IANA][,burst=N][,slots=N][,capacity=N]
                                [,key=TEMPLATE][,max-wait=D][,cost=N|{COST}][,settle={ANSWER}][,global=RATE/UNIT[:BURST]]
                                [,in-flight=N][,adapt=on|off|key][,floor=RATE/UNIT][,fair=on|off][,weights=KEY:N|KEY:N]
                                [,priority=on|off][,priority-floor=PCT]
                           UNIT is s, m, h, or a calendar unit: day, week (ISO, from Monday 00:00)
                           or month (from the 1st), in zone=IANA_NAME (default UTC), e.g.
                           'http:request=2000/day,zone=America/Los_Angeles': a fixed window with
                           the zone's real day lengths (23 or 25 h across DST); a job over it is
                           parked until the reset, never archived for it; see docs/quotas.md;
                           TEMPLATE may use {type}, {payload.FIELD}, {header.NAME};
                           several --limit for one TYPE, each with name=, are its named limits,
                           every job takes from all of them at once (all or nothing); the type's
                           options (key, max-wait, global, in-flight, adapt, floor, fair, weights,
                           priority, priority-floor)
                           go on one of them; e.g. --limit 'http:request=3000/m,name=requests'
                           --limit 'http:request=90000/m,name=tokens,cost={body.max_tokens}'
                           cost= is a number or one of {payload.FIELD}, {header.NAME}, and for
                           http:request {body.FIELD}: a job whose cost is missing, not a whole
                           number, under 1 or over the burst is archived with the reason
                           settle={answer.PATH} or {answer-header.NAME}, on a named limit of
                           http:request: after the answer, the job is charged what it used
                           (e.g. {answer.usage.total_tokens}); the rest goes back to the bucket
                           as the upstream gives it back when it answers (docs/third-party.md)
                           in-flight=N: at most N of these jobs run at once across the fleet;
                             in-flight=auto[:[FLOOR-]CEIL]: a bound that follows the upstream's
                             latency (for services that slow down instead of saying 429), from
                             FLOOR (default 1) to CEIL (default 1000); see docs/adaptive.md
                           policy=P, what the limit promises (default token-bucket):
                             token-bucket    RATE per UNIT on average, bursts up to burst=N
                                             (default: a second's worth, at least 1)
                             fixed-window    at most RATE per aligned UNIT (up to 2x across an edge);
                                             the policy of a calendar unit (implied; no other takes one)
                             sliding-log     at most RATE in any span of one UNIT, exactly
                             sliding-window  about RATE in any span of one UNIT, exactly RATE in any
                                             slots=N whole slots (default 10), in constant memory
                             leaky-bucket    an even pace, one every UNIT/RATE; at most capacity=N
                                             waiting (default as burst), beyond that refused
                           for the window policies RATE is a whole number; burst, slots and
                           capacity apply to their policy only; global= is a token bucket
                           adapt=on|off|key (token-bucket up to 1000000/s; default on): RATE is a
                             ceiling, and the fleet learns what the upstream allows: a 429 or
                             503 lowers the rate, successes raise it back; floor=RATE/UNIT is
                             the least rate (default a tenth of RATE); see docs/adaptive.md;
                             with key= and global= the upstream's refusals and quotas apply
                             to global= (one account), adapt=key to each key's own bucket;
                             a limit named tokens, input-tokens or output-tokens follows the
                             upstream's announcements about that quota (docs/third-party.md)
                           fair=on|off (default on with key= and global=): the keys share the
                             global bucket by weight, none starving the others; weights=
                             gives keys (as the template derives them) other weights than 1,
                             e.g. weights=tenant:acme:3|tenant:beta:2; see docs/fairness.md
                           priority=on|off (default on with fair shares, else off): a job of a
                             higher priority (1 first to 5 last, enqueue --priority) gets the
                             bucket first, behind at most what is booked, never behind the
                             backlog of lower ones; priority-floor=PCT (0.1 to 50, default 5,
                             implies priority=on) is the rate the lower priorities keep while
                             they have work; see docs/priorities.md
  --unlimited TYPE         run TYPE's jobs with no limit, repeatable; a built-in type runs
                           only with a limit or this (without either, its jobs go back
                           to their queue for a worker that runs them)
  --limits FILE            limits file, JSON {"limits": [{"type": "...", "rate": "50/s", ...}]}
                           or, named .yaml or .yml, YAML of the same schema,
                           with the spec's options as fields ("policy", "zone", "burst", "slots",
                           "capacity", "key", "max_wait", "cost", "global", "in_flight" (N or "auto:…"),
                           "adapt": true|false|"key", "floor", "fair": true|false,
                           "weights": {"KEY": N}, "priority": true|false, "priority_floor": PCT);
                           a type's named limits as a list under it,
                           "limits": [{"name": "requests", "rate": "3000/m"}, ...];
                           a field given twice, or a second YAML document, is an error
                           naming its line; the --limit flags for a type replace the
                           file's entry for it
  --max-wait DURATION      how long a job may wait here for its turn before it goes
                           back to the queue, unless its limit says (default 5s,
                           at most 24h, as a limit's max-wait=)
  --queues SPEC            queues and priorities, "critical=6,default=3,low=1" or "default"
                           (default "default"); each is served with its family: a
                           member per job priority (1-5) and key lane (QUEUE:pN,
                           QUEUE:pN:lK), higher job priorities dequeued first
  --strict-priority        empty higher-priority queues first (job priorities too)
  --horizon DURATION       archive a job throttled for longer than this (default 24h);
                           the time a job is parked for a calendar quota's reset does not count
  --shutdown-timeout D     how long running jobs may finish on shutdown (default 30s)
  --status-interval D      how often to log a status line, 0 for never (default 10s)
  --metrics-addr ADDR      serve Prometheus /metrics and /healthz on ADDR,
                           e.g. 127.0.0.1:9090 (default: off)
  --key-prefix PREFIX      prefix of the limiter's Redis keys (default "sluice:")
  --history-step D         the step of the last hour each limit keeps in the limiter Redis
                           for the dashboard and sluice inspect: every D this worker adds
                           what it did to the type's ring of 120 steps (docs/control.md,
                           "History"); 1s to 10m, default 30s (120 steps: the last hour),
                           off or 0 to write none
  --failure-policy P       when the limiter Redis is down: closed (jobs go back to
                           the queue), open (no limit), or local (each process
                           takes 1/N of every limit; needs --hosts) (default closed)
  --hosts N|auto           worker processes in the fleet, for --failure-policy local;
                           auto counts them from asynq's heartbeats in the queue Redis
  --http-timeout D         timeout of one http:request job (default 30s)
  --http-hosts LIST        the only hosts http:request jobs may call, "api.example.com,10.0.0.7";
                           others, and redirects to them, are archived (default: any host)
  --log-format F           text or json (default text)
  --log-level L            debug, info, warn or error (default info)
  --version                print the version and exit

Environment:
  Every flag may come from SLUICE_<FLAG>, the flag's name in capitals with '_' for
  '-': SLUICE_LIMITER_REDIS for --limiter-redis, SLUICE_LIMIT for --limit (several
  limits separated by ';' or newlines). A flag given wins over its variable, and
  a limit from --limit or SLUICE_LIMIT over the limits file's entry for its type.
  REDIS_URL is read when neither --redis nor SLUICE_REDIS is set.
  OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_/_METRICS_ENDPOINT) exports spans and
  metrics over OTLP/HTTP, with the other standard OTEL_* variables; see docs/metrics.md.

Examples:
  worker --redis redis://127.0.0.1:6379/0 --limit 'http:request=50/s,burst=5'

  worker --limit 'http:request=100/m,policy=sliding-log'   # at most 100 in any minute

  worker --redis rediss://worker:s3cret@queues.internal:6380/0 \
    --limiter-redis redis-cluster://limits-1.internal:6379,limits-2.internal:6379 \
    --limit 'http:request=100/m,burst=10,key=tenant:{header.sluice-key},global=1000/m' \
    --queues critical=6,default=3,low=1 --concurrency 50 \
    --failure-policy local --hosts 8 --metrics-addr 127.0.0.1:9090

Logs go to stderr; SIGINT or SIGTERM stops the worker gracefully (a second
one exits at once, with status 130). Exit status: 0 stopped, 1 runtime failure
(a Redis that cannot be reached, say), 2 bad usage or input.
`

// config is what the flags ask for, checked but not yet turned into clients.
type config struct {
	redisURL        string
	limiterURL      string // never empty after parseFlags: --redis by default
	concurrency     int
	prefetch        int      // --prefetch: throttle.WithPrefetch's n
	limits          []string // --limit, in order
	unlimited       []string // --unlimited: built-in types allowed to run without a limit
	limitsFile      string
	maxWait         time.Duration
	queues          map[string]int
	strictPriority  bool
	horizon         time.Duration
	shutdownTimeout time.Duration
	statusInterval  time.Duration
	historyStep     time.Duration // --history-step; 0: off
	metricsAddr     string
	keyPrefix       string
	failure         throttle.FailurePolicy
	hosts           int // 0 when --hosts is not given or is auto
	hostsAuto       bool
	httpTimeout     time.Duration
	httpHosts       []string
	logFormat       string
	logLevel        slog.Level

	warnings []string // things worth saying once the logger exists
}

// stringsFlag collects the values of a repeatable flag.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, " ") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

// Repeatable lets the flag's environment variable hold several values.
func (s *stringsFlag) Repeatable() {}

// parseFlags reads and checks args, before any I/O but reading the
// environment. It returns flag.ErrHelp for --help, cli.ErrVersion for
// --version, and errors matching cli.ErrUsage otherwise. The limit specs are kept as written: loadLimits
// parses them.
func parseFlags(args []string) (config, error) {
	fs := cli.NewFlags(prog)
	var (
		c                              config
		limits, unlimited              stringsFlag
		queues, failure, level, format string
	)
	fs.StringVar(&c.redisURL, "redis", "", "")
	fs.StringVar(&c.limiterURL, "limiter-redis", "", "")
	fs.IntVar(&c.concurrency, "concurrency", 10, "")
	fs.IntVar(&c.prefetch, "prefetch", 0, "")
	fs.Var(&limits, "limit", "")
	fs.Var(&unlimited, "unlimited", "")
	fs.StringVar(&c.limitsFile, "limits", "", "")
	fs.DurationVar(&c.maxWait, "max-wait", 5*time.Second, "")
	fs.StringVar(&queues, "queues", "default", "")
	fs.BoolVar(&c.strictPriority, "strict-priority", false, "")
	fs.DurationVar(&c.horizon, "horizon", 24*time.Hour, "")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "")
	fs.DurationVar(&c.statusInterval, "status-interval", 10*time.Second, "")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "")
	fs.StringVar(&c.keyPrefix, "key-prefix", throttle.DefaultKeyPrefix, "")
	var historyStep string
	fs.StringVar(&historyStep, "history-step", "30s", "")
	fs.StringVar(&failure, "failure-policy", "closed", "")
	var hosts string
	fs.StringVar(&hosts, "hosts", "", "")
	fs.DurationVar(&c.httpTimeout, "http-timeout", 30*time.Second, "")
	var httpHosts string
	fs.StringVar(&httpHosts, "http-hosts", "", "")
	fs.StringVar(&format, "log-format", "text", "")
	fs.StringVar(&level, "log-level", "info", "")
	fs.Fallback("redis", "REDIS_URL")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	c.limits = limits
	c.unlimited = unlimited

	positive := func(name string, d time.Duration) error {
		if d <= 0 {
			return cli.Usagef("--%s %v must be positive", name, d)
		}
		return nil
	}
	var err error
	if err := fs.NoArgs(); err != nil {
		return config{}, err
	}
	switch {
	case c.concurrency < 1:
		return config{}, cli.Usagef("--concurrency %d must be at least 1", c.concurrency)
	case c.prefetch < 0 || c.prefetch > 255:
		return config{}, cli.Usagef("--prefetch %d must be from 0 to 255", c.prefetch)
	case fs.Given("limits") && strings.TrimSpace(c.limitsFile) == "":
		return config{}, cli.Usagef("--limits is empty: want the path of a JSON or YAML limits file")
	case c.statusInterval < 0:
		return config{}, cli.Usagef("--status-interval %v must not be negative (0 turns the status line off)", c.statusInterval)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"max-wait", c.maxWait}, {"horizon", c.horizon},
		{"shutdown-timeout", c.shutdownTimeout}, {"http-timeout", c.httpTimeout},
	} {
		if err := positive(d.name, d.v); err != nil {
			return config{}, err
		}
	}
	if c.maxWait > limitspec.MaxMaxWait {
		return config{}, cli.Usagef("--max-wait %v is longer than %v (a job would hold a worker slot that long)", c.maxWait, limitspec.MaxMaxWait)
	}
	if c.httpHosts, err = parseHosts(httpHosts); err != nil {
		return config{}, cli.Usagef("--http-hosts %q: %w", httpHosts, err)
	}
	if c.queues, err = parseQueues(queues); err != nil {
		return config{}, cli.Usagef("--queues %q: %w", queues, err)
	}
	if err := checkKeyPrefix(c.keyPrefix); err != nil {
		return config{}, err
	}
	if c.historyStep, err = parseHistoryStep(historyStep); err != nil {
		return config{}, err
	}
	if c.metricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.metricsAddr); err != nil {
			return config{}, cli.Usagef("--metrics-addr %q is not HOST:PORT, e.g. 127.0.0.1:9090", c.metricsAddr)
		}
	}
	if c.failure, err = parseFailurePolicy(failure); err != nil {
		return config{}, err
	}
	if fs.Given("hosts") {
		if hosts == "auto" {
			c.hostsAuto = true
		} else if c.hosts, err = strconv.Atoi(hosts); err != nil || c.hosts < 1 {
			return config{}, cli.Usagef("--hosts %q must be a whole number of at least 1, or auto", hosts)
		}
	}
	switch {
	case c.failure == throttle.FailLocal && !fs.Given("hosts"):
		return config{}, cli.Usagef("--failure-policy local needs --hosts N (or auto), the number of worker processes in the fleet: " +
			"while the limiter Redis is down each process takes 1/N of every limit")
	case c.failure != throttle.FailLocal && fs.Given("hosts"):
		c.warnings = append(c.warnings, fmt.Sprintf("--hosts %s is used only with --failure-policy local; ignored", hosts))
	}
	switch format {
	case "text", "json":
		c.logFormat = format
	default:
		return config{}, cli.Usagef("--log-format %q: want text or json", format)
	}
	if c.logLevel, err = parseLogLevel(level); err != nil {
		return config{}, err
	}

	if !fs.Given("limiter-redis") {
		c.limiterURL = c.redisURL
	} else if strings.TrimSpace(c.limiterURL) == "" {
		return config{}, cli.Usagef("--limiter-redis is empty: leave it out to use the queue Redis")
	}
	return c, nil
}

// parseQueues parses "critical=6,default=3,low=1": queue names with
// priorities, a name alone meaning priority 1.
func parseQueues(s string) (map[string]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New(`no queue: want NAME[=PRIORITY],..., e.g. "default" or "critical=6,default=3,low=1"`)
	}
	queues := make(map[string]int)
	for part := range strings.SplitSeq(s, ",") {
		name, prio, hasPrio := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		switch {
		case name == "":
			return nil, fmt.Errorf("empty queue name in %q (a stray comma?)", part)
		case strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
			return nil, fmt.Errorf("queue name %q contains a space or control character", name)
		case queues[name] != 0:
			return nil, fmt.Errorf("queue %q given twice", name)
		}
		n := 1
		if hasPrio {
			var err error
			prio = strings.TrimSpace(prio)
			if n, err = strconv.Atoi(prio); err != nil || n < 1 {
				return nil, fmt.Errorf("queue %q: priority %q is not a whole number from 1 up", name, prio)
			}
		}
		queues[name] = n
	}
	return queues, nil
}

// checkKeyPrefix refuses what throttle.WithKeyPrefix would refuse on every
// call, so that the mistake shows at start.
func checkKeyPrefix(p string) error {
	switch {
	case len(p) > maxKeyPrefix:
		return cli.Usagef("--key-prefix is %d bytes, longer than %d", len(p), maxKeyPrefix)
	case strings.ContainsAny(p, "{}"):
		return cli.Usagef("--key-prefix %q must not contain '{' or '}' (they would move keys between Redis Cluster slots)", p)
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return cli.Usagef("--key-prefix %q contains a control character", p)
	}
	return nil
}

// parseHistoryStep reads --history-step: off or 0 (0 returned), else a
// duration from historyMinStep to historyMaxStep, in whole milliseconds.
func parseHistoryStep(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "off" || s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, cli.Usagef("--history-step %q: want a duration such as 30s or 1m, or off", s)
	case d == 0:
		return 0, nil
	case d < historyMinStep || d > historyMaxStep:
		return 0, cli.Usagef("--history-step %v: want %v to %v (the ring keeps 120 steps), or off", d, historyMinStep, historyMaxStep)
	}
	return d.Truncate(time.Millisecond), nil
}

func parseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, cli.Usagef("--log-level %q: want debug, info, warn or error", s)
}

func parseFailurePolicy(s string) (throttle.FailurePolicy, error) {
	switch s {
	case "closed":
		return throttle.FailClosed, nil
	case "open":
		return throttle.FailOpen, nil
	case "local":
		return throttle.FailLocal, nil
	}
	return 0, cli.Usagef("--failure-policy %q: want closed, open or local", s)
}

// parseHosts reads --http-hosts: host names or addresses, comma-separated,
// without scheme, port or path; "" means any host.
func parseHosts(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var hosts []string
	for _, h := range strings.Split(list, ",") {
		h = strings.TrimSpace(h)
		switch {
		case h == "":
			return nil, errors.New("an empty host")
		case strings.ContainsAny(h, "/:@?# ") && !isIPv6(h):
			return nil, fmt.Errorf("%q is not a host name or address (no scheme, port or path)", h)
		}
		hosts = append(hosts, strings.Trim(h, "[]"))
	}
	return hosts, nil
}

func isIPv6(h string) bool {
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.To4() == nil
}
