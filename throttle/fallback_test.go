package throttle

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice/internal/redistest"
)

// fbStore is a memory store that can be taken down: while down, every call
// fails as an unreachable Redis does. It counts the calls that reach it.
type fbStore struct {
	mem  *memoryStore
	down atomic.Bool

	reserves, refunds, cooldowns atomic.Int64

	// holdNext makes the next reserve report on entered, then wait for release.
	holdNext         atomic.Bool
	entered, release chan struct{}
	// cancelDuringNext makes the next reserve call cancelCaller and fail.
	cancelDuringNext atomic.Bool
	cancelCaller     context.CancelFunc
}

func newFBStore(clk clock) *fbStore {
	return &fbStore{mem: newMemoryStore(WithClock(clk)), entered: make(chan struct{}), release: make(chan struct{})}
}

var errConnRefused = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (s *fbStore) reserveBatch(ctx context.Context, reqs []request) ([]decision, error) {
	s.reserves.Add(1)
	if s.down.Load() {
		return nil, &storeError{op: "reserve", err: errConnRefused}
	}
	return s.mem.reserveBatch(ctx, reqs)
}

func (s *fbStore) reserve(ctx context.Context, req request) (decision, error) {
	s.reserves.Add(1)
	if s.holdNext.CompareAndSwap(true, false) {
		s.entered <- struct{}{}
		<-s.release
	}
	if s.cancelDuringNext.CompareAndSwap(true, false) {
		s.cancelCaller()
		return decision{}, &storeError{op: "reserve", err: ctx.Err()}
	}
	if s.down.Load() {
		return decision{}, &storeError{op: "reserve", err: errConnRefused}
	}
	return s.mem.reserve(ctx, req)
}

func (s *fbStore) refund(ctx context.Context, req request, d decision, id string) (bool, error) {
	s.refunds.Add(1)
	if s.down.Load() {
		return false, &storeError{op: "refund", err: errConnRefused}
	}
	return s.mem.refund(ctx, req, d, id)
}

func (s *fbStore) charge(ctx context.Context, req request, d decision, used int, id string) (bool, error) {
	if s.down.Load() {
		return false, &storeError{op: "settle", err: errConnRefused}
	}
	return s.mem.charge(ctx, req, d, used, id)
}

func (s *fbStore) cooldown(ctx context.Context, prefix string, b Bucket, d time.Duration) (time.Duration, error) {
	s.cooldowns.Add(1)
	if s.down.Load() {
		return 0, &storeError{op: "cooldown", err: errConnRefused}
	}
	return s.mem.cooldown(ctx, prefix, b, d)
}

func (s *fbStore) cooldownLeft(ctx context.Context, prefix, key string) (time.Duration, error) {
	s.cooldowns.Add(1)
	if s.down.Load() {
		return 0, &storeError{op: "cooldown", err: errConnRefused}
	}
	return s.mem.cooldownLeft(ctx, prefix, key)
}

func (s *fbStore) peek(ctx context.Context, prefix string, b Bucket) (State, error) {
	s.cooldowns.Add(1)
	if s.down.Load() {
		return State{}, &storeError{op: "peek", err: errConnRefused}
	}
	return s.mem.peek(ctx, prefix, b)
}

func (s *fbStore) adapt(ctx context.Context, prefix, key string, o adaptOp) (AdaptState, error) {
	if s.down.Load() {
		return AdaptState{}, &storeError{op: "adapt", err: errConnRefused}
	}
	return s.mem.adapt(ctx, prefix, key, o)
}

func (s *fbStore) shares(ctx context.Context, prefix, key string, most int) (shareView, error) {
	if s.down.Load() {
		return shareView{}, &storeError{op: "shares", err: errConnRefused}
	}
	return s.mem.shares(ctx, prefix, key, most)
}

func (s *fbStore) reset(ctx context.Context, prefix string, b Bucket) error {
	s.cooldowns.Add(1)
	if s.down.Load() {
		return &storeError{op: "reset", err: errConnRefused}
	}
	return s.mem.reset(ctx, prefix, b)
}

func (s *fbStore) configErr() error { return nil }

func (s *fbStore) calls() int64 { return s.reserves.Load() + s.refunds.Load() + s.cooldowns.Load() }

// fbLocal returns a FailLocal Limiter over store for a fleet of hosts, timed by clk.
func fbLocal(store Store, clk clock, hosts int, opts ...Option) *Limiter {
	return NewLimiter(store, append([]Option{WithFailurePolicy(FailLocal), WithHosts(fixedHosts(hosts)), withClock(clk)}, opts...)...)
}

// fbDrain takes single tokens until the bucket refuses, and returns how many it got.
func fbDrain(t *testing.T, lim *Limiter, key string, limit Limit) int {
	t.Helper()
	for n := 0; ; n++ {
		res, err := lim.TryAcquire(context.Background(), key, limit, 1)
		require.NoError(t, err)
		if !res.Allowed {
			return n
		}
		require.Less(t, n, 1_000_000, "the bucket never refuses")
	}
}

// fbSum is the value of the int64 sum metric name for the attribute kv, or 0.
func fbSum(t *testing.T, r *sdkmetric.ManualReader, name string, kv ...attribute.KeyValue) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%s is a %T", name, m.Data)
		points:
			for _, dp := range sum.DataPoints {
				for _, want := range kv {
					if got, ok := dp.Attributes.Value(want.Key); !ok || got != want.Value {
						continue points
					}
				}
				total += dp.Value
			}
		}
	}
	return total
}

// Four hosts in fallback on a limit of 100/s burst 20 each get 25/s burst 5:
// together exactly the global limit, over a second of fake time.
func TestFallbackGrantsEachHostItsShare(t *testing.T) {
	clk := newFakeClock()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	limit := Limit{Rate: 100, Period: time.Second, Burst: 20}

	fleet := make([]*Limiter, 4)
	for i := range fleet {
		st := newFBStore(clk)
		st.down.Store(true)
		fleet[i] = fbLocal(st, clk, 4, withProbeInterval(time.Hour), WithMeterProvider(mp))
	}

	// At the first instant each host has its share of the burst, and then the
	// next token comes 1/25 s later.
	for i, lim := range fleet {
		assert.Equal(t, 5, fbDrain(t, lim, "api", limit), "host %d", i)
		res, err := lim.TryAcquire(context.Background(), "api", limit, 1)
		require.NoError(t, err)
		assert.Equal(t, 40*time.Millisecond, res.RetryAfter, "host %d", i)
		assert.Equal(t, ModeFallback, lim.Mode(), "host %d", i)
	}

	// Over the next second, in steps of 10 ms, one token every 40 ms.
	granted := make([]int, len(fleet))
	for i := range granted {
		granted[i] = 5
	}
	for step := 1; step <= 100; step++ {
		clk.advance(10 * time.Millisecond)
		for i, lim := range fleet {
			got := fbDrain(t, lim, "api", limit)
			want := 0
			if step%4 == 0 {
				want = 1
			}
			require.Equal(t, want, got, "step %d host %d", step, i)
			granted[i] += got
		}
	}
	total := 0
	for i, g := range granted {
		assert.Equal(t, 5+25, g, "host %d", i)
		total += g
	}
	// The fleet took Burst + Rate·1s: the global limit, not four times it.
	assert.Equal(t, limit.Burst+int(limit.Rate), total)
	assert.Equal(t, int64(total), fbSum(t, reader, "sluice.throttle.fallback.grants"))
}

func TestFallbackShareRounding(t *testing.T) {
	cases := []struct {
		burst, hosts int
		rate         float64
		wantBurst    int
		wantRate     float64
	}{
		{burst: 20, hosts: 4, rate: 100, wantBurst: 5, wantRate: 25},
		{burst: 7, hosts: 2, rate: 10, wantBurst: 3, wantRate: 5},   // rounded down
		{burst: 3, hosts: 4, rate: 100, wantBurst: 1, wantRate: 25}, // at least one token
		{burst: 1, hosts: 10, rate: 1, wantBurst: 1, wantRate: 0.1},
		{burst: 9, hosts: 1, rate: 9, wantBurst: 9, wantRate: 9},
	}
	for i, c := range cases {
		b := shareOf(Bucket{Key: "k", Limit: Limit{Rate: c.rate, Burst: c.burst}, N: 1}, c.hosts)
		assert.Equal(t, c.wantBurst, b.Limit.(Limit).Burst, "case %d", i)
		assert.InDelta(t, c.wantRate, b.Limit.(Limit).Rate, 1e-12, "case %d", i)

		// The same through a Limiter: the first instant grants the share of the burst.
		clk := newFakeClock()
		st := newFBStore(clk)
		st.down.Store(true)
		lim := fbLocal(st, clk, c.hosts)
		assert.Equal(t, c.wantBurst, fbDrain(t, lim, "k", Limit{Rate: c.rate, Burst: c.burst}), "case %d", i)
	}
}

// A request the local share cannot hold fails as the store's failure: it is
// not invalid, and would be granted by the shared bucket.
func TestFallbackRequestLargerThanTheShare(t *testing.T) {
	clk := newFakeClock()
	st := newFBStore(clk)
	st.down.Store(true)
	lim := fbLocal(st, clk, 4)
	limit := Limit{Rate: 100, Burst: 20}

	_, err := lim.TryAcquire(context.Background(), "k", limit, 6)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.NotErrorIs(t, err, ErrInvalid)
	assert.NotErrorIs(t, err, ErrRefused, "an outage, not a refusal")
	var se *storeError
	assert.ErrorAs(t, err, &se)
	assert.ErrorIs(t, err, errConnRefused)

	res, err := lim.TryAcquire(context.Background(), "k", limit, 5)
	require.NoError(t, err)
	assert.True(t, res.Allowed)
}

// A count of hosts below 1 at run time is unknown: the call fails as FailClosed would.
func TestFallbackUnknownHostCountFailsClosed(t *testing.T) {
	clk := newFakeClock()
	st := newFBStore(clk)
	st.down.Store(true)
	var n atomic.Int64
	lim := NewLimiter(st, WithFailurePolicy(FailLocal), WithHosts(func() int { return int(n.Load()) }), withClock(clk))
	limit := Limit{Rate: 100, Burst: 20}

	_, err := lim.TryAcquire(context.Background(), "k", limit, 1)
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.NotErrorIs(t, err, ErrInvalid)
	_, err = lim.Cooldown(context.Background(), "k", limit, time.Second)
	assert.ErrorIs(t, err, ErrUnavailable)

	n.Store(2) // the heartbeat has a count again
	assert.Equal(t, 10, fbDrain(t, lim, "k", limit))
}

func TestFallbackWithoutHostsFailsEveryCallBeforeIO(t *testing.T) {
	configs := []struct {
		name   string
		opts   []Option
		reason string
	}{
		{"no WithHosts", nil, "FailLocal needs WithHosts"},
		{"nil hosts", []Option{WithHosts(nil)}, "FailLocal needs WithHosts"},
	}
	ctx := context.Background()
	limit := Limit{Rate: 10, Burst: 5}
	buckets := []Bucket{{Key: "{a}:x", Limit: limit}, {Key: "{a}:y", Limit: limit}}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			st := newFBStore(newFakeClock())
			st.down.Store(true) // not that it matters: nothing may reach it
			lim := NewLimiter(st, append([]Option{WithFailurePolicy(FailLocal)}, c.opts...)...)

			calls := map[string]error{}
			calls["Acquire"] = lim.Acquire(ctx, "k", limit, 1)
			calls["AcquireAll"] = lim.AcquireAll(ctx, buckets)
			_, calls["TryAcquire"] = lim.TryAcquire(ctx, "k", limit, 1)
			_, calls["TryAcquireAll"] = lim.TryAcquireAll(ctx, buckets)
			_, calls["Reserve"] = lim.Reserve(ctx, "k", limit, 1, time.Second)
			_, calls["ReserveAll"] = lim.ReserveAll(ctx, buckets, time.Second)
			_, calls["Cooldown"] = lim.Cooldown(ctx, "k", limit, time.Second)
			for name, err := range calls {
				require.Error(t, err, name)
				assert.ErrorIs(t, err, ErrInvalid, name)
				assert.Contains(t, err.Error(), c.reason, name)
			}
			assert.Equal(t, int64(0), st.calls())
			assert.Equal(t, ModeShared, lim.Mode())
		})
	}
}

// Within the probe interval the store is not asked; after it, one call asks.
func TestFallbackProbesOncePerInterval(t *testing.T) {
	clk := newFakeClock()
	st := newFBStore(clk)
	lim := fbLocal(st, clk, 2, withProbeInterval(time.Second))
	limit := Limit{Rate: 1000, Burst: 1000} // never the reason for a refusal here

	steps := []struct {
		at        time.Duration // since base
		up        bool          // the store can answer
		wantCalls int64         // store calls so far, after this step's call
		wantMode  string
	}{
		{at: 0, up: true, wantCalls: 1, wantMode: ModeShared},
		{at: 0, up: false, wantCalls: 2, wantMode: ModeFallback}, // fails: fallback until 1s
		{at: 0, up: false, wantCalls: 2, wantMode: ModeFallback},
		{at: 500 * time.Millisecond, up: false, wantCalls: 2, wantMode: ModeFallback},
		{at: 999 * time.Millisecond, up: true, wantCalls: 2, wantMode: ModeFallback}, // up, but not asked yet
		{at: 999 * time.Millisecond, up: false, wantCalls: 2, wantMode: ModeFallback},
		{at: time.Second, up: false, wantCalls: 3, wantMode: ModeFallback}, // the probe fails: until 2s
		{at: time.Second, up: false, wantCalls: 3, wantMode: ModeFallback},
		{at: 1500 * time.Millisecond, up: true, wantCalls: 3, wantMode: ModeFallback},
		{at: 2 * time.Second, up: true, wantCalls: 4, wantMode: ModeShared}, // the probe succeeds
		{at: 2 * time.Second, up: true, wantCalls: 5, wantMode: ModeShared},
		{at: 2 * time.Second, up: false, wantCalls: 6, wantMode: ModeFallback}, // down again: until 3s
		{at: 2500 * time.Millisecond, up: true, wantCalls: 6, wantMode: ModeFallback},
		{at: 3 * time.Second, up: true, wantCalls: 7, wantMode: ModeShared},
	}
	for i, s := range steps {
		clk.at(int64(s.at / time.Microsecond))
		st.down.Store(!s.up)
		res, err := lim.TryAcquire(context.Background(), "k", limit, 1)
		require.NoError(t, err, "step %d", i)
		assert.True(t, res.Allowed, "step %d", i)
		assert.Equal(t, s.wantCalls, st.reserves.Load(), "step %d", i)
		assert.Equal(t, s.wantMode, lim.Mode(), "step %d", i)
	}
}

// While one call probes the store, the others stay local.
func TestFallbackOneProbeAtATime(t *testing.T) {
	clk := newFakeClock()
	st := newFBStore(clk)
	st.down.Store(true)
	lim := fbLocal(st, clk, 2, withProbeInterval(time.Second))
	limit := Limit{Rate: 1000, Burst: 1000}
	ctx := context.Background()

	_, err := lim.TryAcquire(ctx, "k", limit, 1)
	require.NoError(t, err)
	require.Equal(t, ModeFallback, lim.Mode())

	clk.advance(time.Second)
	st.down.Store(false)
	st.holdNext.Store(true)
	probed := make(chan error)
	go func() {
		_, err := lim.TryAcquire(ctx, "k", limit, 1)
		probed <- err
	}()
	<-st.entered // the probe is in the store

	for i := range 3 {
		res, err := lim.TryAcquire(ctx, "k", limit, 1)
		require.NoError(t, err, "call %d", i)
		assert.True(t, res.Allowed, "call %d", i)
	}
	assert.Equal(t, int64(2), st.reserves.Load(), "only the probe reached the store")
	assert.Equal(t, ModeFallback, lim.Mode())

	close(st.release)
	require.NoError(t, <-probed)
	assert.Equal(t, ModeShared, lim.Mode())
	_, err = lim.TryAcquire(ctx, "k", limit, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(3), st.reserves.Load())
}

// A reservation goes back to the bucket that made it: a local one is refunded
// locally and never reaches the store; a shared one goes to the store.
func TestFallbackReservationRefundsWhereItWasMade(t *testing.T) {
	clk := newFakeClock()
	st := newFBStore(clk)
	// Four per hour burst 8; a host's share is one per hour burst 2.
	limit := Limit{Rate: 4, Period: time.Hour, Burst: 8}
	lim := fbLocal(st, clk, 4)
	ctx := context.Background()

	// Shared: a reservation made in the store, cancelled while the store is down.
	require.Equal(t, 8, fbDrain(t, lim, "k", limit))
	shared, err := lim.Reserve(ctx, "k", limit, 1, -1)
	require.NoError(t, err)
	require.Positive(t, shared.Delay())
	st.down.Store(true)
	assert.ErrorIs(t, shared.Cancel(ctx), ErrUnavailable)
	assert.Equal(t, int64(1), st.refunds.Load())
	assert.Equal(t, ModeShared, lim.Mode(), "a failed refund does not switch")

	// Fallback: the local share's burst, then a reservation an hour away.
	assert.Equal(t, 2, fbDrain(t, lim, "k", limit))
	require.Equal(t, ModeFallback, lim.Mode())
	local, err := lim.Reserve(ctx, "k", limit, 1, -1)
	require.NoError(t, err)
	assert.InDelta(t, time.Hour.Seconds(), local.Delay().Seconds(), 1)

	st.down.Store(false) // even with the store up, the refund must not go there
	require.NoError(t, local.Cancel(ctx))
	assert.Equal(t, int64(1), st.refunds.Load())

	// The token is back in the local bucket (still in fallback: no probe yet).
	st.down.Store(true)
	assert.Equal(t, 0, fbDrain(t, lim, "k", limit), "a cancelled reservation an hour ahead frees the next slot, not a token now")
	again, err := lim.Reserve(ctx, "k", limit, 1, -1)
	require.NoError(t, err)
	assert.InDelta(t, time.Hour.Seconds(), again.Delay().Seconds(), 1, "the slot freed by Cancel is taken again")

	// Wait with an ended context cancels, locally too.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, again.Wait(cctx), context.Canceled)
	assert.Equal(t, int64(1), st.refunds.Load())
	// 8 grants, 1 refusal and 1 reservation in shared mode; in fallback only
	// the call that found the store down.
	assert.Equal(t, int64(11), st.reserves.Load())
}

func TestFallbackModeChangeAndMetrics(t *testing.T) {
	clk := newFakeClock()
	st := newFBStore(clk)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	type change struct {
		mode string
		err  error
	}
	var mu sync.Mutex
	var changes []change
	lim := fbLocal(st, clk, 2, WithMeterProvider(mp), WithModeChange(func(mode string, err error) {
		mu.Lock()
		changes = append(changes, change{mode, err})
		mu.Unlock()
	}))
	limit := Limit{Rate: 10, Burst: 10}
	ctx := context.Background()
	inMode := func(mode string) int64 {
		return fbSum(t, reader, "sluice.throttle.mode", attribute.String("sluice.mode", mode))
	}

	require.Equal(t, 10, fbDrain(t, lim, "k", limit))
	assert.Equal(t, ModeShared, lim.Mode())
	assert.Equal(t, int64(1), inMode(ModeShared))
	assert.Equal(t, int64(0), inMode(ModeFallback))
	assert.Empty(t, changes)

	st.down.Store(true)
	clk.advance(time.Second) // a full shared bucket, but the store is gone
	assert.Equal(t, 5, fbDrain(t, lim, "k", limit))
	assert.Equal(t, ModeFallback, lim.Mode())
	assert.Equal(t, int64(0), inMode(ModeShared))
	assert.Equal(t, int64(1), inMode(ModeFallback))
	assert.Equal(t, int64(5), fbSum(t, reader, "sluice.throttle.fallback.grants"))
	assert.Equal(t, int64(1), fbSum(t, reader, "sluice.throttle.store.errors"))
	require.Len(t, changes, 1)
	assert.Equal(t, ModeFallback, changes[0].mode)
	assert.ErrorIs(t, changes[0].err, ErrUnavailable)
	assert.ErrorIs(t, changes[0].err, errConnRefused)

	st.down.Store(false)
	clk.advance(time.Second)
	res, err := lim.TryAcquire(ctx, "k", limit, 1)
	require.NoError(t, err)
	assert.True(t, res.Allowed)
	assert.Equal(t, ModeShared, lim.Mode())
	assert.Equal(t, int64(1), inMode(ModeShared))
	assert.Equal(t, int64(0), inMode(ModeFallback))
	assert.Equal(t, int64(5), fbSum(t, reader, "sluice.throttle.fallback.grants"))
	require.Len(t, changes, 2)
	assert.Equal(t, change{ModeShared, nil}, changes[1])
}

func TestFallbackCooldownIsLocal(t *testing.T) {
	clk := newFakeClock()
	st := newFBStore(clk)
	st.down.Store(true)
	lim := fbLocal(st, clk, 2)
	limit := Limit{Rate: 10, Burst: 4} // a host's share: 5/s burst 2
	ctx := context.Background()

	// The store fails on the cooldown itself: it goes on the local bucket.
	next, err := lim.Cooldown(ctx, "k", limit, 3*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, next)
	assert.Equal(t, int64(1), st.cooldowns.Load())
	assert.Equal(t, ModeFallback, lim.Mode())

	res, err := lim.TryAcquire(ctx, "k", limit, 1)
	require.NoError(t, err)
	assert.False(t, res.Allowed)
	assert.Equal(t, 3*time.Second, res.RetryAfter)

	// In the probe interval a cooldown does not touch the store either, and
	// never shortens the one in place.
	next, err = lim.Cooldown(ctx, "k", limit, time.Second)
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, next)
	assert.Equal(t, int64(1), st.cooldowns.Load())
	assert.Equal(t, int64(0), st.reserves.Load())

	// After the probe interval, a cooldown is the call that asks the store.
	clk.advance(3 * time.Second)
	st.down.Store(false)
	_, err = lim.Cooldown(ctx, "other", limit, time.Second)
	require.NoError(t, err)
	assert.Equal(t, ModeShared, lim.Mode())

	// FailClosed reports the failure, as before.
	closed := NewLimiter(st)
	st.down.Store(true)
	_, err = closed.Cooldown(ctx, "k", limit, time.Second)
	assert.ErrorIs(t, err, ErrUnavailable)
}

// A store call cut short by its caller's cancelled context says nothing about
// the store: no policy answers it and the mode stays.
func TestFallbackCancelledCallerKeepsMode(t *testing.T) {
	clk := newFakeClock()
	st := newFBStore(clk)
	lim := fbLocal(st, clk, 2)
	limit := Limit{Rate: 10, Burst: 10}

	ctx, cancel := context.WithCancel(context.Background())
	st.cancelCaller = cancel
	st.cancelDuringNext.Store(true)
	_, err := lim.TryAcquire(ctx, "k", limit, 1)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.Equal(t, ModeShared, lim.Mode())

	res, err := lim.TryAcquire(context.Background(), "k", limit, 1)
	require.NoError(t, err)
	assert.True(t, res.Allowed)
	assert.Equal(t, int64(2), st.reserves.Load())
}

// Buckets acquired together are each cut to the host's share, all or nothing.
func TestFallbackMultiBucket(t *testing.T) {
	clk := newFakeClock()
	st := newFBStore(clk)
	st.down.Store(true)
	lim := fbLocal(st, clk, 4)
	buckets := []Bucket{
		{Key: "{acct}:tenant", Limit: Limit{Rate: 100, Burst: 20}}, // share: 25/s burst 5
		{Key: "{acct}:global", Limit: Limit{Rate: 10, Burst: 8}},   // share: 2.5/s burst 2
	}
	ctx := context.Background()
	for i := range 2 {
		res, err := lim.TryAcquireAll(ctx, buckets)
		require.NoError(t, err, "call %d", i)
		assert.True(t, res.Allowed, "call %d", i)
	}
	res, err := lim.TryAcquireAll(ctx, buckets)
	require.NoError(t, err)
	assert.False(t, res.Allowed)
	assert.Equal(t, 400*time.Millisecond, res.RetryAfter)
	assert.Equal(t, Limit{Rate: 10, Burst: 8}, buckets[1].Limit, "the caller's buckets are not changed")

	clk.advance(400 * time.Millisecond)
	r, err := lim.ReserveAll(ctx, buckets, time.Second)
	require.NoError(t, err)
	assert.Equal(t, time.Duration(0), r.Delay())
	assert.Equal(t, int64(1), st.reserves.Load())
}

// A real redis-server, killed and restarted under a FailLocal Limiter: the
// host goes on at its share of the limit, then back to the shared bucket.
func TestFallbackRedisKilledAndRestarted(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	prefix := redistest.Prefix(t)
	store := NewRedisStore(rdb)
	t.Cleanup(func() { _ = store.Close() })
	counted := &countingStore{Store: store}
	clk := newFakeClock() // mode timing and the local bucket; Redis keeps its own TIME
	var mu sync.Mutex
	var modes []string
	lim := fbLocal(counted, clk, 4, WithKeyPrefix(prefix), withProbeInterval(time.Second),
		WithModeChange(func(mode string, _ error) {
			mu.Lock()
			modes = append(modes, mode)
			mu.Unlock()
		}))
	limit := Limit{Rate: 100, Period: time.Second, Burst: 20}
	ctx := context.Background()
	key := redisKey(prefix, "api")

	// Shared: the grant is in Redis.
	res, err := lim.TryAcquire(ctx, "api", limit, 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	assert.Equal(t, 19, res.Remaining)
	assert.Equal(t, ModeShared, lim.Mode())
	assert.Equal(t, int64(1), rdb.Exists(ctx, key).Val())

	// Redis dies: the first call fails over, then the host has 25/s burst 5.
	srv.Kill(t)
	granted := fbDrain(t, lim, "api", limit)
	assert.Equal(t, 5, granted)
	assert.Equal(t, ModeFallback, lim.Mode())
	assert.Equal(t, int64(2), counted.calls.Load())
	for range 24 { // to 960 ms: one token each 40 ms, and no store calls
		clk.advance(40 * time.Millisecond)
		granted += fbDrain(t, lim, "api", limit)
	}
	assert.Equal(t, 5+24, granted)
	assert.Equal(t, int64(2), counted.calls.Load())
	clk.advance(40 * time.Millisecond) // 1 s: the probe fails, the call is served locally
	granted += fbDrain(t, lim, "api", limit)
	assert.Equal(t, 5+25, granted, "a host's share of one second: Burst/4 + Rate/4")
	assert.Equal(t, int64(3), counted.calls.Load())
	assert.Equal(t, ModeFallback, lim.Mode())

	// Redis is back, empty. Until the probe interval has passed, calls stay local.
	srv.Restart(t)
	clk.advance(500 * time.Millisecond)
	assert.Equal(t, 5, fbDrain(t, lim, "api", limit), "the local bucket has refilled")
	assert.Equal(t, int64(3), counted.calls.Load())
	assert.Equal(t, int64(0), rdb.Exists(ctx, key).Val(), "local grants never touch Redis")

	// After it, the next call asks Redis, which answers: shared again.
	clk.advance(500 * time.Millisecond)
	res, err = lim.TryAcquire(ctx, "api", limit, 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	assert.Equal(t, 19, res.Remaining, "the restarted Redis's full bucket, less this grant")
	assert.Equal(t, ModeShared, lim.Mode())
	assert.Equal(t, int64(4), counted.calls.Load())
	assert.Equal(t, int64(1), rdb.Exists(ctx, key).Val(), "the grant is in Redis")
	assert.Positive(t, rdb.PTTL(ctx, key).Val())

	mu.Lock()
	assert.Equal(t, []string{ModeFallback, ModeShared}, modes)
	mu.Unlock()
}

// In fallback, CooldownLeft answers from the local bucket, without asking the
// dead store, and sees a cooldown put on the local bucket.
func TestFallbackCooldownLeftIsLocal(t *testing.T) {
	clk := newFakeClock()
	st := newFBStore(clk)
	lim := fbLocal(st, clk, 2, withProbeInterval(time.Hour))
	limit := Limit{Rate: 10, Burst: 2}
	ctx := context.Background()
	st.down.Store(true)
	_, err := lim.TryAcquire(ctx, "k", limit, 1)
	require.NoError(t, err)
	require.Equal(t, ModeFallback, lim.Mode())

	_, err = lim.Cooldown(ctx, "k", limit, 3*time.Second)
	require.NoError(t, err)
	before := st.calls()
	left, err := lim.CooldownLeft(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, left, "the local bucket's cooldown")
	assert.Equal(t, before, st.calls(), "the dead store was not asked")
}

// A caller whose deadline leaves the store no time to answer learns nothing
// about the store: it neither switches the Limiter to fallback nor, under
// FailOpen, gets a grant.
func TestShortDeadlineIsNotAStoreFailure(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	limit := Limit{Rate: 1, Period: time.Hour, Burst: 1}
	for _, policy := range []Option{
		WithFailurePolicy(FailOpen),
		func(c *config) { WithFailurePolicy(FailLocal)(c); WithHosts(fixedHosts(1))(c) },
	} {
		lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(redistest.Prefix(t)), policy)
		require.NoError(t, lim.Acquire(context.Background(), "k", limit, 1))
		for range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Microsecond)
			res, err := lim.TryAcquire(ctx, "k", limit, 1)
			cancel()
			assert.False(t, err == nil && res.Allowed, "granted past an exhausted bucket on a tiny deadline")
		}
		assert.Equal(t, ModeShared, lim.Mode())
	}
}

// Under every policy, fallback answers from the local store, and a
// reservation made there is cancelled there, not in the store.
func TestFallbackPolicies(t *testing.T) {
	for _, p := range policies {
		t.Run(p.String(), func(t *testing.T) {
			clk := newFakeClock()
			st := newFBStore(clk)
			st.down.Store(true)
			lim := fbLocal(st, clk, 1)
			ctx := context.Background()
			res, err := lim.TryAcquire(ctx, "k", p, 1)
			require.NoError(t, err)
			require.True(t, res.Allowed)
			require.Equal(t, ModeFallback, lim.Mode())

			r, err := lim.Reserve(ctx, "k", p, 1, -1)
			require.NoError(t, err)
			require.Positive(t, r.Delay())
			booked, err := lim.TryAcquire(ctx, "k", p, 1)
			require.NoError(t, err)
			require.NoError(t, r.Cancel(ctx))
			res, err = lim.TryAcquire(ctx, "k", p, 1)
			require.NoError(t, err)
			assert.Less(t, res.RetryAfter, booked.RetryAfter, "the slot came back")
			again, err := lim.Reserve(ctx, "k", p, 1, -1)
			require.NoError(t, err)
			assert.InDelta(t, r.Delay().Seconds(), again.Delay().Seconds(), 1, "the same slot")
			assert.Equal(t, int64(0), st.refunds.Load(), "refunded locally")
		})
	}
}

// fixedHosts is a count of n hosts that never changes, for WithHosts.
func fixedHosts(n int) func() int { return func() int { return n } }
