package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// policyName names the demo's one bucket, shared by every host.
const policyName = "reports"

// host is one pretend host: a worker pool with a Limiter of its own, on a
// Redis connection of its own. Nothing is shared in the process; the hosts
// share the limit only through the bucket in Redis, as separate machines would.
type host struct {
	name    string
	rdb     *redis.Client // the Limiter's connection
	pool    *workers.Pool
	metrics *sdkmetric.MeterProvider
	reader  *sdkmetric.ManualReader // to read the pool's sluice.jobs.wait
}

// startHost starts host name's pool on queue qname, taking tokens from the
// policy's bucket under key prefix prefix.
func startHost(name string, b *backend, o options, qname, prefix string, t *tally) (*host, error) {
	h := &host{name: name, rdb: b.client(), reader: sdkmetric.NewManualReader()}
	h.metrics = sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	lim := throttle.NewLimiter(throttle.NewRedisStore(h.rdb), throttle.WithKeyPrefix(prefix))
	pool, err := workers.NewPool(workers.Config{
		Redis:       b.queueOpt(),
		Limiter:     lim,
		Concurrency: o.Concurrency,
		Queues:      map[string]int{qname: 1},
		// A job whose turn is further off than this goes back to the queue
		// holding its turn (a ticket), freeing the worker for a job whose turn
		// is near; it comes back just before its turn and runs without
		// asking again.
		MaxWait: o.MaxWait,
		// How often asynq moves due come-backs to the queue: often, so that
		// they land near their turn (asynq's own default is 5s).
		DelayedTaskCheckInterval: 100 * time.Millisecond,
		TaskCheckInterval:        100 * time.Millisecond,
		ShutdownTimeout:          5 * time.Second,
		Logger:                   o.Logger.With("host", name),
		MeterProvider:            h.metrics,
	})
	if err != nil {
		h.rdb.Close()
		return nil, err
	}
	h.pool = pool
	pool.HandleFunc(taskType, t.handler(name, o.Work, o.observe), &workers.Policy{Name: policyName, Limit: o.Limit})
	if err := pool.Start(); err != nil {
		h.stop(context.Background())
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return h, nil
}

// stop shuts the pool down gracefully (jobs waiting for their turn go back to
// the queue, running handlers finish) and closes the host's connections.
func (h *host) stop(ctx context.Context) error {
	err := h.pool.Shutdown(ctx)
	h.rdb.Close()
	h.metrics.Shutdown(context.WithoutCancel(ctx))
	if err != nil {
		return fmt.Errorf("%s: shutdown: %w", h.name, err)
	}
	return nil
}

// waited returns how long this host's jobs waited in their worker for their
// turn, in all, and how many jobs did: the sum and count of the pool's
// sluice.jobs.wait histogram.
func (h *host) waited(ctx context.Context) (time.Duration, uint64) {
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(ctx, &rm); err != nil {
		return 0, 0
	}
	var sum float64
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			hist, ok := m.Data.(metricdata.Histogram[float64])
			if m.Name != "sluice.jobs.wait" || !ok {
				continue
			}
			for _, dp := range hist.DataPoints {
				sum += dp.Sum
				n += dp.Count
			}
		}
	}
	return time.Duration(sum * float64(time.Second)), n
}
