package throttle

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

const scope = "github.com/sluicehq/sluice/throttle"

// outcome of one call, the sluice.outcome attribute.
type outcome int

const (
	outGranted  outcome = iota // granted at once
	outWaited                  // granted after sleeping until its slot
	outDenied                  // the wait exceeded the caller's budget
	outCanceled                // the caller's context ended while it slept
	outError                   // store failure, or invalid request
	outFailOpen                // store failure, granted by FailOpen
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"granted", "waited", "denied", "canceled", "error", "fail_open"}

type telemetry struct {
	tracer     trace.Tracer
	acquired   metric.Int64Counter
	wait       metric.Float64Histogram
	refunds    metric.Int64Counter
	settles    metric.Int64Counter
	errors     metric.Int64Counter
	cooldowns  metric.Int64Counter
	failOpen   metric.Int64Counter
	fallback   metric.Int64Counter             // sluice.throttle.fallback.grants
	mode       metric.Int64UpDownCounter       // sluice.throttle.mode
	byMode     [2][]metric.AddOption           // shared, fallback
	byOutcome  [numOutcomes][]metric.AddOption // prebuilt, so recording allocates nothing
	waitOption []metric.RecordOption
	label      func(string) string
}

func newTelemetry(c config) *telemetry {
	m := c.meterProvider.Meter(scope)
	t := &telemetry{tracer: c.tracerProvider.Tracer(scope), label: c.label}
	// Instrument constructors only fail on invalid names; ours are constants, and
	// on error OTel still returns a usable no-op instrument.
	t.acquired, _ = m.Int64Counter("sluice.throttle.acquisitions",
		metric.WithDescription("Calls to take tokens, by outcome."), metric.WithUnit("{call}"))
	t.wait, _ = m.Float64Histogram("sluice.throttle.wait",
		metric.WithDescription("Time a granted call slept until its slot."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	t.refunds, _ = m.Int64Counter("sluice.throttle.refunds",
		metric.WithDescription("Cancelled reservations whose refund the store processed (at most once each; a policy may give nothing back)."), metric.WithUnit("{reservation}"))
	t.settles, _ = m.Int64Counter("sluice.throttle.settles",
		metric.WithDescription("Buckets of reservations settled at their real cost whose settle the store processed (at most once each)."), metric.WithUnit("{bucket}"))
	t.errors, _ = m.Int64Counter("sluice.throttle.store.errors",
		metric.WithDescription("Store calls that failed."), metric.WithUnit("{error}"))
	t.cooldowns, _ = m.Int64Counter("sluice.throttle.cooldowns",
		metric.WithDescription("Cooldowns put on buckets."), metric.WithUnit("{cooldown}"))
	t.failOpen, _ = m.Int64Counter("sluice.throttle.failopen",
		metric.WithDescription("Calls granted without the store because of FailOpen."), metric.WithUnit("{call}"))
	t.fallback, _ = m.Int64Counter("sluice.throttle.fallback.grants",
		metric.WithDescription("Calls granted by the local bucket of FailLocal while the store was down."), metric.WithUnit("{call}"))
	t.mode, _ = m.Int64UpDownCounter("sluice.throttle.mode",
		metric.WithDescription("Limiters with FailLocal by mode, shared or fallback: each counts 1 in its current mode."), metric.WithUnit("{limiter}"))
	for i, name := range [2]string{ModeShared, ModeFallback} {
		t.byMode[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("sluice.mode", name)))}
	}
	for o := range t.byOutcome {
		t.byOutcome[o] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("sluice.outcome", outcomeNames[o])))}
	}
	t.waitOption = []metric.RecordOption{}
	return t
}

func (t *telemetry) attrs(key string, extra ...attribute.KeyValue) []attribute.KeyValue {
	if t.label != nil {
		extra = append(extra, attribute.String("sluice.bucket", t.label(key)))
	}
	return extra
}

func (t *telemetry) outcome(ctx context.Context, key string, o outcome) {
	if t.label == nil {
		t.acquired.Add(ctx, 1, t.byOutcome[o]...)
		return
	}
	t.acquired.Add(ctx, 1, metric.WithAttributes(t.attrs(key, attribute.String("sluice.outcome", outcomeNames[o]))...))
}

func (t *telemetry) waited(ctx context.Context, key string, d time.Duration) {
	if t.label == nil {
		t.wait.Record(ctx, d.Seconds(), t.waitOption...)
		return
	}
	t.wait.Record(ctx, d.Seconds(), metric.WithAttributes(t.attrs(key)...))
}

func (t *telemetry) storeError(ctx context.Context, op string) {
	t.errors.Add(ctx, 1, metric.WithAttributes(attribute.String("sluice.op", op)))
}

// inMode adds delta to a Limiter's count in sluice.throttle.mode: in fallback if down, else shared.
func (t *telemetry) inMode(ctx context.Context, down bool, delta int64) {
	i := 0
	if down {
		i = 1
	}
	t.mode.Add(ctx, delta, t.byMode[i]...)
}
