package main

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// An automatic in-flight bound (in-flight=auto) as the worker shows it: in
// the status line ("in flight 9 of auto 1-200: 9 held, baseline 51ms,
// recent 55ms, gradient") and as gauges. A policy with a key template has a
// bound per key and is left out, as its adaptive rate is.

// autoFlightOf is pol's automatic in-flight semaphore and bound, "" if it
// has none or one per key.
func autoFlightOf(pol workers.Policy) (string, throttle.Concurrency) {
	if !pol.InFlightAuto {
		return "", throttle.Concurrency{}
	}
	return workers.InFlightOf(pol)
}

// flightWant is one policy's automatic bound.
type flightWant struct {
	p         *policyRate
	name, key string
	c         throttle.Concurrency
}

// flights lists the policies with one automatic bound.
func (r *rates) flights() []flightWant {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []flightWant
	for _, p := range r.policies {
		if p.flightKey != "" {
			out = append(out, flightWant{p, p.name, p.flightKey, p.flight})
		}
	}
	return out
}

// readFlight reads each automatic bound, for the next snapshot.
func (r *rates) readFlight(ctx context.Context, lim *throttle.Limiter) {
	for _, w := range r.flights() {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := lim.InFlight(cctx, w.key, w.c)
		cancel()
		desc := ""
		if err == nil {
			desc = describeFlight(st, w.c)
		}
		r.mu.Lock()
		w.p.inflight = desc
		r.mu.Unlock()
	}
}

// describeFlight is an automatic bound for the status line.
func describeFlight(st throttle.AdaptState, c throttle.Concurrency) string {
	ceiling := c.Max
	if ceiling == 0 {
		ceiling = 1000
	}
	return fmt.Sprintf("in flight %d of auto %d-%d: %d held, baseline %v, recent %v, %s",
		st.Bound, max(c.Floor, 1), ceiling, st.Held, st.Baseline.Round(100*time.Microsecond), st.Recent.Round(100*time.Microsecond), st.Reason)
}

// observeFlight exports each automatic in-flight bound as gauges read from
// the store at each collection: sluice.throttle.inflight.bound (with the
// reason it last moved), .held, .baseline and .recent (seconds).
func observeFlight(mp metric.MeterProvider, lim *throttle.Limiter, r *rates) error {
	m := mp.Meter("github.com/sluicehq/sluice/cmd/worker")
	bound, err := m.Int64ObservableGauge("sluice.throttle.inflight.bound",
		metric.WithDescription("An automatic in-flight bound (in-flight=auto): the slots the fleet may hold now, and why it last moved (cold, slow-start, gradient, overload, probe)."),
		metric.WithUnit("{slot}"))
	if err != nil {
		return err
	}
	held, err := m.Int64ObservableGauge("sluice.throttle.inflight.held",
		metric.WithDescription("The slots of an in-flight bound held now, fleet-wide."), metric.WithUnit("{slot}"))
	if err != nil {
		return err
	}
	baseline, err := m.Float64ObservableGauge("sluice.throttle.inflight.baseline",
		metric.WithDescription("An automatic in-flight bound's baseline latency: the upstream's, unloaded."), metric.WithUnit("s"))
	if err != nil {
		return err
	}
	recent, err := m.Float64ObservableGauge("sluice.throttle.inflight.recent",
		metric.WithDescription("An automatic in-flight bound's recent latency: the mean of its latest window."), metric.WithUnit("s"))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for _, w := range r.flights() {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := lim.InFlight(cctx, w.key, w.c)
			cancel()
			if err != nil {
				continue
			}
			policy := attribute.String("sluice.policy", w.name)
			o.ObserveInt64(bound, int64(st.Bound), metric.WithAttributes(policy, attribute.String("sluice.reason", st.Reason)))
			o.ObserveInt64(held, int64(st.Held), metric.WithAttributes(policy))
			o.ObserveFloat64(baseline, st.Baseline.Seconds(), metric.WithAttributes(policy))
			o.ObserveFloat64(recent, st.Recent.Seconds(), metric.WithAttributes(policy))
		}
		return nil
	}, bound, held, baseline, recent)
	return err
}
