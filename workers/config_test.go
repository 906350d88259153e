package workers_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

func validConfig() workers.Config {
	return workers.Config{
		Redis:   asynq.RedisClientOpt{Addr: "127.0.0.1:1"}, // never dialled by these tests
		Limiter: throttle.NewLimiter(throttle.NewMemoryStore()),
	}
}

func TestNewPoolChecksConfig(t *testing.T) {
	cases := []struct {
		name string
		edit func(*workers.Config)
		err  string
	}{
		{"no Redis", func(c *workers.Config) { c.Redis = nil }, "Redis is required"},
		{"no Limiter", func(c *workers.Config) { c.Limiter = nil }, "Limiter is required"},
		{"misconfigured Limiter", func(c *workers.Config) {
			c.Limiter = throttle.NewLimiter(throttle.NewMemoryStore(), throttle.WithKeyPrefix("{bad}"))
		}, "Limiter is misconfigured"},
		{"negative Concurrency", func(c *workers.Config) { c.Concurrency = -1 }, "Concurrency -1 must not be negative"},
		{"blank queue", func(c *workers.Config) { c.Queues = map[string]int{" ": 1} }, `queue name " " is blank`},
		{"zero priority", func(c *workers.Config) { c.Queues = map[string]int{"q": 0} }, `queue "q": priority 0 must be at least 1`},
		{"negative MaxWait", func(c *workers.Config) { c.MaxWait = -time.Second }, "MaxWait -1s must not be negative"},
		{"negative Horizon", func(c *workers.Config) { c.Horizon = -time.Second }, "Horizon -1s must not be negative"},
		{"negative ShutdownTimeout", func(c *workers.Config) { c.ShutdownTimeout = -1 }, "ShutdownTimeout -1ns must not be negative"},
		{"negative DelayedTaskCheckInterval", func(c *workers.Config) { c.DelayedTaskCheckInterval = -1 }, "DelayedTaskCheckInterval -1ns"},
	}
	for _, c := range cases {
		cfg := validConfig()
		c.edit(&cfg)
		p, err := workers.NewPool(cfg)
		assert.Nil(t, p, c.name)
		assert.ErrorContains(t, err, "workers: invalid Config: "+c.err, c.name)
	}
}

// Handle's mistakes come back from Start, which then starts nothing.
func TestStartReportsHandleMistakes(t *testing.T) {
	p, err := workers.NewPool(validConfig())
	require.NoError(t, err)
	ok := func(context.Context, *asynq.Task) error { return nil }
	lim := throttle.Limit{Rate: 10, Burst: 2}

	p.HandleFunc("", ok, nil)
	p.HandleFunc("nil", nil, nil)
	p.HandleFunc("twice", ok, nil)
	p.HandleFunc("twice", ok, nil)
	p.HandleFunc("no name", ok, &workers.Policy{Limit: lim})
	p.HandleFunc("brace", ok, &workers.Policy{Name: "a{b", Limit: lim})
	p.HandleFunc("bad limit", ok, &workers.Policy{Name: "bad", Limit: throttle.Limit{Rate: 0, Burst: 1}})
	p.HandleFunc("bad global", ok, &workers.Policy{Name: "g", Limit: lim, Global: &throttle.Limit{Rate: 1}})
	p.HandleFunc("cost", ok, &workers.Policy{Name: "cost", Limit: lim, Cost: 3})
	p.HandleFunc("a", ok, &workers.Policy{Name: "shared", Limit: lim})
	p.HandleFunc("b", ok, &workers.Policy{Name: "shared", Limit: throttle.Limit{Rate: 5, Burst: 2}})
	p.HandleFunc("c", ok, &workers.Policy{Name: "shared", Limit: lim}) // same limits: fine
	byTenant := func(*asynq.Task) (string, error) { return "acme", nil }
	p.HandleFunc("fair no key", ok, &workers.Policy{Name: "f1", Limit: lim, Global: lim, Fair: true})
	p.HandleFunc("fair no global", ok, &workers.Policy{Name: "f2", Limit: lim, Key: byTenant, Fair: true})
	p.HandleFunc("bad weight", ok, &workers.Policy{Name: "f3", Limit: lim, Key: byTenant, Global: lim, Fair: true, Weights: map[string]int{"acme": 0}})
	p.HandleFunc("weights unfair", ok, &workers.Policy{Name: "f4", Limit: lim, Weights: map[string]int{"acme": 2}})
	p.HandleFunc("floor alone", ok, &workers.Policy{Name: "p1", Limit: lim, PriorityFloor: 0.1})
	p.HandleFunc("bad floor", ok, &workers.Policy{Name: "p2", Limit: lim, Priorities: true, PriorityFloor: 0.7})
	p.HandleFunc("bad horizon", ok, &workers.Policy{Name: "p3", Limit: lim, Priorities: true, FairHorizon: -time.Second})
	p.HandleFunc("no limit", ok, &workers.Policy{Name: "n0"})
	p.HandleFunc("unnamed", ok, &workers.Policy{Name: "n1", Limits: []workers.NamedLimit{{Limit: lim}}})
	p.HandleFunc("named twice", ok, &workers.Policy{Name: "n2", Limits: []workers.NamedLimit{{Name: "r", Limit: lim}, {Name: "r", Limit: lim}}})
	p.HandleFunc("named cost", ok, &workers.Policy{Name: "n3", Limits: []workers.NamedLimit{{Name: "r", Limit: lim}, {Name: "t", Limit: lim, Cost: 3}}})
	p.HandleFunc("named adapt", ok, &workers.Policy{Name: "n4", Adapt: true, Limits: []workers.NamedLimit{{Name: "w", Limit: throttle.FixedWindow{Max: 5, Window: time.Second}}}})

	err = p.Start()
	for _, want := range []string{
		`Handle(""): empty task type`,
		`Handle("nil"): nil handler`,
		`Handle("twice"): task type registered twice`,
		`Handle("no name"): policy "": Name is required`,
		`Handle("brace"): policy "a{b": Name "a{b" must not contain braces`,
		`Handle("bad limit"): policy "bad": Limit: throttle: rate 0 must be positive`,
		`Handle("bad global"): policy "g": Global: throttle: burst 0 must be at least 1`,
		`Handle("cost"): policy "cost": Cost 3 is larger than Limit's burst 2`,
		`Handle("b"): policy "shared" is already registered with other limits`,
		`Handle("fair no key"): policy "f1": Fair needs Key`,
		`Handle("fair no global"): policy "f2": Fair needs Global`,
		`Handle("bad weight"): policy "f3": Weights["acme"] 0 is not between 1 and 1000000`,
		`Handle("weights unfair"): policy "f4": Weights are set without Fair`,
		`Handle("floor alone"): policy "p1": PriorityFloor is set without Priorities`,
		`Handle("bad floor"): policy "p2": PriorityFloor 0.7 is not between 0.001 and 0.5`,
		`Handle("bad horizon"): policy "p3": FairHorizon -1s is not between 0 and 1h0m0s`,
		`Handle("no limit"): policy "n0": Limit: is nil`,
		`Handle("unnamed"): policy "n1": Limits[0]: Name is required`,
		`Handle("named twice"): policy "n2": Limits[1]: Name "r" is given twice`,
		`Handle("named cost"): policy "n3": Cost 3 is larger than Limits[1] ("t")'s burst 2`,
		`Handle("named adapt"): policy "n4": Adapt needs a token bucket (throttle.Limit) as its first limit`,
	} {
		assert.ErrorContains(t, err, want)
	}
	assert.NotContains(t, err.Error(), `Handle("c")`)
	require.NoError(t, p.Shutdown(context.Background()))
	assert.ErrorIs(t, p.Start(), workers.ErrPoolClosed)
	assert.Panics(t, func() { p.HandleFunc("late", ok, nil) })
}
