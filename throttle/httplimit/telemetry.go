package httplimit

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const scope = "github.com/sluicehq/sluice/throttle/httplimit"

// outcome of one limited request, the sluice.outcome attribute.
type outcome int

const (
	outAllowed  outcome = iota // served, with a token
	outLimited                 // answered by the deny handler
	outFailOpen                // served without a token: the store was down
	outError                   // answered by the error handler
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"allowed", "limited", "fail_open", "error"}

type telemetry struct {
	requests  metric.Int64Counter
	byOutcome [numOutcomes][]metric.AddOption // prebuilt, so counting allocates nothing
}

func newTelemetry(mp metric.MeterProvider, policy string) *telemetry {
	t := &telemetry{}
	// Instrument constructors only fail on invalid names; ours is a constant,
	// and on error OTel still returns a usable no-op instrument.
	t.requests, _ = mp.Meter(scope).Int64Counter("sluice.httplimit.requests",
		metric.WithDescription("Requests the rate-limit middleware decided on, by outcome."), metric.WithUnit("{request}"))
	for o := range t.byOutcome {
		t.byOutcome[o] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
			attribute.String("sluice.outcome", outcomeNames[o]),
			attribute.String("sluice.policy", policy),
		))}
	}
	return t
}

func (t *telemetry) count(ctx context.Context, o outcome) {
	t.requests.Add(ctx, 1, t.byOutcome[o]...)
}
