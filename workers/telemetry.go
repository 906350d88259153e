package workers

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/queue"
)

const scope = "github.com/sluicehq/sluice/workers"

// outcome is how a job's run in this process ended: the sluice.outcome attribute.
type outcome int

const (
	outDone     outcome = iota // the handler succeeded
	outFailed                  // the handler failed: asynq retries or archives it
	outRequeued                // sent back to the queue, to come back later
	outArchived                // archived by the pool: past the horizon, or no bucket key
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"done", "failed", "requeued", "archived"}

// reason is why a job was sent back: the sluice.reason attribute.
type reason int

const (
	reasonBudget   reason = iota // its turn is further off than its wait budget
	reasonUpstream               // the handler got a 429/503 from its upstream
	reasonShutdown               // the pool is shutting down
	reasonStore                  // the limiter's store is unavailable
	reasonHandler                // the handler returned a queue.ThrottledError
	reasonInFlight               // no in-flight slot within its wait budget, or its slot was lost
	reasonShare                  // its tenant is over its share of the global bucket (Policy.Fair)
	reasonQuota                  // parked until a calendar quota's reset (quota.go)
	numReasons
)

var reasonNames = [numReasons]string{"budget", "upstream", "shutdown", "store", "handler", "in_flight", "share", "quota"}

func (r reason) String() string { return reasonNames[r] }

// telemetry holds the pool's instruments. Attributes are bounded: the policy
// name, never a derived bucket key.
type telemetry struct {
	tracer    trace.Tracer
	processed metric.Int64Counter
	requeues  metric.Int64Counter
	cooldowns metric.Int64Counter
	wait      metric.Float64Histogram
	waiting   metric.Int64UpDownCounter
}

func newTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) *telemetry {
	m := mp.Meter(scope)
	t := &telemetry{tracer: tp.Tracer(scope)}
	// Instrument constructors fail only on invalid names; ours are constants,
	// and on error OTel still returns a usable no-op instrument.
	t.processed, _ = m.Int64Counter("sluice.jobs.processed",
		metric.WithDescription("Jobs the pool finished with, by outcome."), metric.WithUnit("{job}"))
	t.requeues, _ = m.Int64Counter("sluice.jobs.requeues",
		metric.WithDescription("Jobs sent back to their queue to come back later, by reason."), metric.WithUnit("{job}"))
	t.cooldowns, _ = m.Int64Counter("sluice.jobs.cooldowns",
		metric.WithDescription("Cooldowns put on a bucket after an upstream 429 or 503."), metric.WithUnit("{cooldown}"))
	t.wait, _ = m.Float64Histogram("sluice.jobs.wait",
		metric.WithDescription("Time a throttled job waited in the worker for its turn before its handler ran."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
	t.waiting, _ = m.Int64UpDownCounter("sluice.jobs.waiting",
		metric.WithDescription("Jobs waiting in the worker now, for their turn or an in-flight slot, by policy and job priority (1 first, 5 last)."), metric.WithUnit("{job}"))
	return t
}

// routeTelemetry holds the attribute sets of one route, built once so that
// recording allocates nothing.
type routeTelemetry struct {
	span      []trace.SpanStartOption
	policy    []metric.AddOption
	record    []metric.RecordOption
	byOutcome [numOutcomes][]metric.AddOption
	byReason  [numReasons][]metric.AddOption
	// byPriority is the policy's attributes with a job's priority (index
	// priority-1), for sluice.jobs.waiting.
	byPriority [queue.LowestPriority - queue.HighestPriority + 1][]metric.AddOption
}

func newRouteTelemetry(taskType, policy string) *routeTelemetry {
	var base []attribute.KeyValue
	if policy != "" {
		base = append(base, attribute.String("sluice.policy", policy))
	}
	with := func(kv ...attribute.KeyValue) attribute.Set {
		return attribute.NewSet(append(append([]attribute.KeyValue(nil), base...), kv...)...)
	}
	rt := &routeTelemetry{
		span: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			append([]attribute.KeyValue{attribute.String("sluice.task.type", taskType)}, base...)...)},
		policy: []metric.AddOption{metric.WithAttributeSet(with())},
		record: []metric.RecordOption{metric.WithAttributeSet(with())},
	}
	for o := range rt.byOutcome {
		rt.byOutcome[o] = []metric.AddOption{metric.WithAttributeSet(with(attribute.String("sluice.outcome", outcomeNames[o])))}
	}
	for i := range rt.byPriority {
		rt.byPriority[i] = []metric.AddOption{metric.WithAttributeSet(with(attribute.Int("sluice.priority", i+queue.HighestPriority)))}
	}
	for r := range rt.byReason {
		rt.byReason[r] = []metric.AddOption{metric.WithAttributeSet(with(attribute.String("sluice.reason", reasonNames[r])))}
	}
	return rt
}

func (p *Pool) outcome(ctx context.Context, rt *route, o outcome) {
	p.tel.processed.Add(ctx, 1, rt.tel.byOutcome[o]...)
	switch o {
	case outDone:
		p.count(rt, cProcessed)
	case outFailed:
		p.count(rt, cFailed)
	case outArchived:
		p.count(rt, cArchived)
	}
}

// asynqArchived counts a job asynq archives after its handler's last
// failure (counted failed already by outcome) as archived too.
func (p *Pool) asynqArchived(rt *route) { p.count(rt, cArchived) }

func (p *Pool) requeued(ctx context.Context, rt *route, r reason) {
	p.tel.requeues.Add(ctx, 1, rt.tel.byReason[r]...)
	p.count(rt, cRequeued)
	p.outcome(ctx, rt, outRequeued)
}

func (p *Pool) cooledDown(ctx context.Context, rt *route) {
	p.tel.cooldowns.Add(ctx, 1, rt.tel.policy...)
	p.count(rt, cCooldowns)
}

func (p *Pool) waited(ctx context.Context, rt *route, d time.Duration) {
	p.tel.wait.Record(ctx, d.Seconds(), rt.tel.record...)
}

// startWaiting counts job j as waiting, by its policy and its priority,
// until the returned func is called.
func (p *Pool) startWaiting(ctx context.Context, j *job) (done func()) {
	rt, prio := j.rt, j.meta.PriorityOr()
	attrs := rt.tel.byPriority[prio-queue.HighestPriority]
	p.tel.waiting.Add(ctx, 1, attrs...)
	p.stats.waiting.Add(1)
	p.stats.waitingBy[prio-queue.HighestPriority].Add(1)
	rt.waiting.Add(1)
	rt.waitingBy[prio-queue.HighestPriority].Add(1)
	return func() {
		p.tel.waiting.Add(ctx, -1, attrs...)
		p.stats.waiting.Add(-1)
		p.stats.waitingBy[prio-queue.HighestPriority].Add(-1)
		rt.waiting.Add(-1)
		rt.waitingBy[prio-queue.HighestPriority].Add(-1)
	}
}
