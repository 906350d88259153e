package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// A fair limit's tenants: the keys sharing its global bucket (docs/fairness.md),
// in the status line and in /metrics.

// statusTenants and metricTenants bound the tenants the status line and
// /metrics name, furthest ahead first: a metric label per tenant of a
// fleet with 100 k tenants would be 100 k series.
const (
	statusTenants = 3
	metricTenants = 20
)

// fairOf is the global bucket and its limit of a fair policy; "" and nil otherwise.
func fairOf(pol workers.Policy) (bucket string, global throttle.Policy) {
	if !pol.Fair || pol.Global == nil {
		return "", nil
	}
	return workers.GlobalKey(pol), pol.Global
}

// fairWant is one fair limit: its policy's rate line, name, global bucket and limit.
type fairWant struct {
	p      *policyRate
	name   string
	bucket string
	global throttle.Policy
}

func (r *rates) fairs() []fairWant {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []fairWant
	for _, p := range r.policies {
		if p.fairBucket != "" {
			out = append(out, fairWant{p, p.name, p.fairBucket, p.fairGlobal})
		}
	}
	return out
}

// readShares reads each fair limit's tenants for the next status line.
func (r *rates) readShares(ctx context.Context, lim *throttle.Limiter) {
	for _, w := range r.fairs() {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		ts, n, err := lim.Shares(cctx, w.bucket, w.global, statusTenants)
		cancel()
		line := ""
		if err == nil && n > 0 {
			line = describeTenants(ts, n)
		}
		r.mu.Lock()
		w.p.tenants = line
		r.mu.Unlock()
	}
}

// describeTenants says "2 keys sharing: tenant:a 50% 12 waiting, tenant:b 50%".
func describeTenants(ts []throttle.TenantShare, n int) string {
	parts := make([]string, 0, len(ts))
	for _, t := range ts {
		s := fmt.Sprintf("%s %.0f%%", t.Tenant, 100*t.Share)
		if t.Priority != queue.DefaultPriority { // a key has a share per priority of its jobs
			s = fmt.Sprintf("%s p%d %.0f%%", t.Tenant, t.Priority, 100*t.Share)
		}
		if t.Waiting > 0 {
			s += fmt.Sprintf(" %d waiting", t.Waiting)
		}
		parts = append(parts, s)
	}
	more := ""
	if n > len(ts) {
		more = fmt.Sprintf(", %d more", n-len(ts))
	}
	return fmt.Sprintf("%d keys sharing: %s%s", n, strings.Join(parts, ", "), more)
}

// observeShares exports each fair limit's tenants as gauges read from the
// store at each collection: sluice.throttle.share.tenants (how many keys
// have turns ahead), and for the metricTenants furthest ahead
// sluice.throttle.share (the key's share of the global rate, 0 to 1) and
// sluice.throttle.share.waiting (turns held by its jobs sent away).
func observeShares(mp metric.MeterProvider, lim *throttle.Limiter, r *rates) error {
	m := mp.Meter("github.com/sluicehq/sluice/cmd/worker")
	count, err := m.Int64ObservableGauge("sluice.throttle.share.tenants",
		metric.WithDescription("Keys with turns ahead on a fair limit's global bucket."))
	if err != nil {
		return err
	}
	share, err := m.Float64ObservableGauge("sluice.throttle.share",
		metric.WithDescription("A key's share of a fair limit's global rate, 0 to 1 (the keys furthest ahead)."))
	if err != nil {
		return err
	}
	waiting, err := m.Int64ObservableGauge("sluice.throttle.share.waiting",
		metric.WithDescription("Turns held by a key's jobs sent back over its share (the keys furthest ahead)."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for _, w := range r.fairs() {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			ts, n, err := lim.Shares(cctx, w.bucket, w.global, metricTenants)
			cancel()
			if err != nil {
				continue
			}
			policy := attribute.String("sluice.policy", w.name)
			o.ObserveInt64(count, int64(n), metric.WithAttributes(policy))
			for _, t := range ts {
				// A key has a share per priority of its jobs (docs/priorities.md).
				attrs := metric.WithAttributes(policy, attribute.String("sluice.key", t.Tenant), attribute.Int("sluice.priority", t.Priority))
				o.ObserveFloat64(share, t.Share, attrs)
				o.ObserveInt64(waiting, int64(t.Waiting), attrs)
			}
		}
		return nil
	}, count, share, waiting)
	return err
}
