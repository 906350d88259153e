package main

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/sluice/throttle"
)

// observeAdaptive exports each adaptive limit's effective rate and ceiling,
// per second, as gauges read from the store at each collection:
// sluice.throttle.adaptive.rate (with the reason it last moved) and
// sluice.throttle.adaptive.ceiling. A limit with a key template and a
// global limit shows its global bucket's, which its upstream's answers set;
// one with a rate per key (adapt=key, or no global) is left out.
func observeAdaptive(mp metric.MeterProvider, lim *throttle.Limiter, r *rates) error {
	m := mp.Meter("github.com/sluicehq/sluice/cmd/worker")
	rate, err := m.Float64ObservableGauge("sluice.throttle.adaptive.rate",
		metric.WithDescription("An adaptive limit's effective rate, per second, and why it last moved (ceiling, 429, header, recovery; cold before the upstream first answers)."),
		metric.WithUnit("1/s"))
	if err != nil {
		return err
	}
	ceiling, err := m.Float64ObservableGauge("sluice.throttle.adaptive.ceiling",
		metric.WithDescription("An adaptive limit's configured rate, per second: the most its effective rate reaches."),
		metric.WithUnit("1/s"))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for _, w := range r.adaptives() {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			_, st, err := lim.AdaptiveLimit(cctx, w.bucket, w.a)
			cancel()
			if err != nil {
				continue
			}
			per := w.a.Ceiling.Period.Seconds()
			if per == 0 {
				per = 1
			}
			policy := attribute.String("sluice.policy", w.name)
			o.ObserveFloat64(rate, st.Rate/per, metric.WithAttributes(policy, attribute.String("sluice.reason", st.Reason)))
			o.ObserveFloat64(ceiling, w.a.Ceiling.Rate/per, metric.WithAttributes(policy))
		}
		return nil
	}, rate, ceiling)
	return err
}
