package workers

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
)

// Defaults for the zero fields of a Config.
const (
	defaultConcurrency              = 10
	defaultMaxWait                  = 5 * time.Second
	defaultHorizon                  = 24 * time.Hour
	defaultShutdownTimeout          = 30 * time.Second
	defaultDelayedTaskCheckInterval = 250 * time.Millisecond
	defaultTaskCheckInterval        = 100 * time.Millisecond
)

// Config configures a Pool. Redis and Limiter are required; every other zero
// field has the default its comment gives.
type Config struct {
	// Redis is where the queues live (asynq's Redis). Required.
	Redis asynq.RedisConnOpt
	// Limiter holds the buckets that Policies take tokens from. Required. It
	// may use another Redis than the queues.
	Limiter *throttle.Limiter

	// Concurrency is how many jobs this process runs at once, waiting for
	// their turn included. 0 means 10.
	Concurrency int
	// Queues are the asynq queues to take jobs from, with their priorities.
	// nil means {"default": 1}. The pool serves each queue's whole family
	// (queue.Family: a member per job priority and lane), weighted so that
	// higher job priorities are dequeued first (see family.go); a name that
	// is itself a member's (ending in :pN or :pN:lK) is refused.
	Queues map[string]int
	// StrictPriority empties higher-priority queues first (asynq's option);
	// job priorities then are strict too: the highest priority with jobs is
	// taken first, its lanes alike (see dequeue.go).
	StrictPriority bool

	// MaxWait is how long a job may wait in this process for its turn before
	// it goes back to the queue instead, holding its turn; a Policy may set
	// its own. 0 means 5s.
	MaxWait time.Duration
	// Horizon bounds how long a job may be throttled: a job that would have to
	// wait again after this long since it was first sent back (or since it was
	// enqueued, if it never was) is archived with a HorizonError. 0 means 24h.
	Horizon time.Duration

	// ShutdownTimeout is how long Shutdown lets running handlers finish before
	// asynq puts their jobs back on the queue. 0 means 30s.
	ShutdownTimeout time.Duration
	// DelayedTaskCheckInterval is how often asynq moves due scheduled and
	// retry jobs to their queue: it bounds how late a job that was sent back
	// comes back. 0 means 250ms (asynq's own default, 5s, makes come-backs late).
	DelayedTaskCheckInterval time.Duration
	// TaskCheckInterval is how long an idle pool sleeps between looks at empty
	// queues; it also bounds how long Shutdown takes to stop taking jobs.
	// 0 means 100ms.
	TaskCheckInterval time.Duration

	// RetryDelay is the delay before a job whose handler failed runs again.
	// nil means exponential backoff from 1s to 10m with full jitter.
	// Throttled jobs never use it.
	RetryDelay asynq.RetryDelayFunc

	// StatusInterval, if positive, makes the pool log its Stats at Info level
	// this often.
	StatusInterval time.Duration

	// Hosts, if set, is refreshed by the pool on every asynq heartbeat (5 s),
	// so the Limiter its Hosts method is given to (throttle.WithHosts, for
	// throttle.FailLocal) knows how many processes share each limit. See
	// HostsFor. nil means no count is kept.
	Hosts *Hosts

	// Logger receives the pool's logs and asynq's. nil means slog.Default().
	// A job sent back because the limiter store is down is logged at Debug
	// only: for one line when the store goes down and one when it is back,
	// give the Limiter throttle.WithModeChange, as cmd/worker does.
	Logger *slog.Logger
	// MeterProvider and TracerProvider receive the pool's metrics and spans.
	// nil means the global providers.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
}

// defaultRetryDelay is Config.RetryDelay's default.
var defaultRetryDelay = backoff.Exponential{Base: time.Second, Max: 10 * time.Minute, Jitter: backoff.FullJitter}

// withDefaults checks c and returns it with every zero field set to its default.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Redis == nil {
		bad("Redis is required")
	}
	if c.Limiter == nil {
		bad("Limiter is required")
	} else if err := c.Limiter.Err(); err != nil {
		bad("Limiter is misconfigured: %v", err)
	}
	if c.Concurrency < 0 {
		bad("Concurrency %d must not be negative", c.Concurrency)
	}
	for name, prio := range c.Queues {
		if strings.TrimSpace(name) == "" {
			bad("queue name %q is blank", name)
		}
		if queue.Reserved(name) {
			bad("queue name %q is named like a member of a queue's family (QUEUE:pN, QUEUE:pN:lK): the pool serves those of each queue it is given", name)
		}
		if prio < 1 {
			bad("queue %q: priority %d must be at least 1", name, prio)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"MaxWait", c.MaxWait},
		{"Horizon", c.Horizon},
		{"ShutdownTimeout", c.ShutdownTimeout},
		{"DelayedTaskCheckInterval", c.DelayedTaskCheckInterval},
		{"TaskCheckInterval", c.TaskCheckInterval},
		{"StatusInterval", c.StatusInterval},
	} {
		if d.v < 0 {
			bad("%s %v must not be negative", d.name, d.v)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("workers: invalid Config: %w", err)
	}

	if c.Concurrency == 0 {
		c.Concurrency = defaultConcurrency
	}
	if len(c.Queues) == 0 {
		c.Queues = map[string]int{"default": 1}
	}
	c.MaxWait = or(c.MaxWait, defaultMaxWait)
	c.Horizon = or(c.Horizon, defaultHorizon)
	c.ShutdownTimeout = or(c.ShutdownTimeout, defaultShutdownTimeout)
	c.DelayedTaskCheckInterval = or(c.DelayedTaskCheckInterval, defaultDelayedTaskCheckInterval)
	c.TaskCheckInterval = or(c.TaskCheckInterval, defaultTaskCheckInterval)
	if c.RetryDelay == nil {
		c.RetryDelay = func(n int, _ error, _ *asynq.Task) time.Duration { return defaultRetryDelay.Delay(n) }
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	return c, nil
}

func or(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// asynqConfig is the asynq.Server configuration of a pool: throttled errors
// are not failures and come back at their time, real failures back off with
// c.RetryDelay.
func (p *Pool) asynqConfig() asynq.Config {
	c := p.cfg
	return asynq.Config{
		Concurrency:              c.Concurrency,
		Queues:                   familyQueues(c.Queues),
		StrictPriority:           c.StrictPriority,
		IsFailure:                queue.IsFailure,
		RetryDelayFunc:           queue.RetryDelayFunc(c.RetryDelay),
		DelayedTaskCheckInterval: c.DelayedTaskCheckInterval,
		TaskCheckInterval:        c.TaskCheckInterval,
		ShutdownTimeout:          c.ShutdownTimeout,
		Logger:                   newAsynqLogger(c.Logger),
		LogLevel:                 asynq.DebugLevel, // the slog handler decides
		HealthCheckFunc: func(err error) {
			if err != nil {
				p.log.Error("workers: queue store unavailable (asynq's Redis)", "err", err)
			}
		},
	}
}
