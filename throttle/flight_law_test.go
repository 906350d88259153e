package throttle

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// queueModel is an upstream that serves c requests at once in s µs each and
// queues the rest: with bound requests kept in flight, Little's law makes
// the mean latency s·max(1, bound/c), and it serves min(bound, c)/s per µs.
type queueModel struct{ c, s float64 }

func (q queueModel) window(bound int, start, interval int64) flightWindow {
	inFlight := float64(bound)
	lat := q.s * math.Max(1, inFlight/q.c)
	n := int64(math.Min(inFlight, q.c) / q.s * float64(interval))
	return flightWindow{n: n, sum: int64(lat * float64(n)), start: start, held: int64(bound)}
}

// runLaw steps the law over windows of the model from st, calling each
// after every step, for steps windows.
func runLaw(st *flightState, p flightParams, q func(i int) queueModel, steps int, each func(i int, st flightState)) {
	now := int64(0)
	for i := range steps {
		w := q(i).window(st.bound, now, p.interval)
		now += p.interval
		st.step(w, now, p, 0.5)
		each(i, *st)
	}
}

// From a cold start the law finds the knee: the learned limit settles
// within a few slots above the upstream's capacity (its queue stays
// short), follows a drop of the capacity within seconds, and climbs back
// when it returns. (The bound Hold grants is the limit's but for the probe
// windows, TestFlightLawProbe.)
func TestFlightLawFindsTheKnee(t *testing.T) {
	p := flightParams{floor: 1, ceiling: 1000, interval: 250_000}
	st := coldFlight(p, 0)
	c := 20.0
	model := func(int) queueModel { return queueModel{c: c, s: 50_000} }
	var at []int
	runLaw(&st, p, model, 40, func(i int, st flightState) { at = append(at, int(st.limit)) })
	for i := 20; i < 40; i++ {
		if at[i] < 15 || at[i] > 25 {
			t.Errorf("window %d: bound %d, want within 25%% of 20 once settled (%v)", i, at[i], at)
			break
		}
	}
	assert.InDelta(t, 50_000, st.base, 1, "the baseline is the unloaded latency")

	c = 8
	at = at[:0]
	runLaw(&st, p, model, 40, func(i int, st flightState) { at = append(at, int(st.limit)) })
	settled := -1
	for i := range at {
		if at[i] >= 6 && at[i] <= 10 && settled < 0 {
			settled = i
		}
		if settled >= 0 && (at[i] < 6 || at[i] > 10) {
			t.Errorf("window %d: bound %d left 8±25%% after settling at window %d (%v)", i, at[i], settled, at)
			break
		}
	}
	require.GreaterOrEqual(t, settled, 0, "bound %v never within 8±25%%", at)
	assert.LessOrEqual(t, settled, 8, "settled within 2 s (8 windows of 250 ms): %v", at)

	c = 20
	at = at[:0]
	runLaw(&st, p, model, 60, func(i int, st flightState) { at = append(at, int(st.limit)) })
	back := -1
	for i := range at {
		if at[i] >= 18 && back < 0 {
			back = i
		}
	}
	require.GreaterOrEqual(t, back, 0, "never climbed back: %v", at)
	assert.LessOrEqual(t, back, 20, "back near 20 within 5 s: %v", at)
}

// The bound never leaves [floor, ceiling], whatever the samples say.
func TestFlightLawBounds(t *testing.T) {
	for _, tc := range []struct {
		floor, ceiling float64
		c, s           float64
	}{
		{5, 12, 20, 50_000}, // capacity above the ceiling
		{5, 100, 2, 50_000}, // below the floor
		{1, 3, 1000, 1000},
		{10, 10, 3, 1000},
	} {
		p := flightParams{floor: tc.floor, ceiling: tc.ceiling, interval: 100_000}
		st := coldFlight(p, 0)
		name := fmt.Sprintf("floor %g ceiling %g capacity %g", tc.floor, tc.ceiling, tc.c)
		runLaw(&st, p, func(int) queueModel { return queueModel{c: tc.c, s: tc.s} }, 400, func(i int, st flightState) {
			if float64(st.bound) < tc.floor || float64(st.bound) > tc.ceiling || st.limit < tc.floor || st.limit > tc.ceiling {
				t.Fatalf("%s, window %d: bound %d limit %g", name, i, st.bound, st.limit)
			}
		})
	}
	// Overload on every window: down to the floor, never under.
	p := flightParams{floor: 3, ceiling: 50, interval: 100_000}
	st := flightState{limit: 50, bound: 50, base: 1000, why: flightGradient}
	for i := range 30 {
		st.step(flightWindow{n: 10, sum: 10_000, over: 5, start: int64(i) * 100_000}, int64(i+1)*100_000, p, 0.5)
		require.GreaterOrEqual(t, st.bound, 3, "window %d", i)
	}
	assert.Equal(t, 3, st.bound, "at the floor after repeated overload")
	assert.Equal(t, flightOverload, st.why)
}

// An overload answer cuts the limit by beta at once, and ends slow start.
func TestFlightLawOverload(t *testing.T) {
	p := flightParams{floor: 1, ceiling: 100, interval: 100_000}
	st := flightState{limit: 40, bound: 40, base: 1000, slow: true, why: flightSlow, probeAt: 1 << 60}
	st.step(flightWindow{n: 100, sum: 100_000, over: 1}, 100_000, p, 0.5)
	assert.InDelta(t, 40*flightBeta, st.limit, 1e-9)
	assert.Equal(t, 30, st.bound)
	assert.False(t, st.slow, "slow start ends")
	assert.Equal(t, int64(100_000), st.at)
}

// The baseline is re-measured by a probe: two windows at flightProbeDepth
// of the limit (one drains, one measures), at the probe period ± jitter,
// after which the limit comes back. A baseline that went stale (the upstream got faster, or the first
// windows queued) is replaced, and throughput never drops below
// flightProbeDepth of the limit's.
func TestFlightLawProbe(t *testing.T) {
	p := flightParams{floor: 1, ceiling: 1000, interval: 100_000}
	// A stale baseline, twice the real one: the bound sits at twice the capacity.
	st := flightState{limit: 40, bound: 40, base: 100_000, why: flightGradient, probeAt: 1_000_000}
	q := queueModel{c: 20, s: 50_000}
	now := int64(0)
	probes := 0
	var probeStarts []int64
	for range 1000 {
		w := q.window(st.bound, now, p.interval)
		now += p.interval
		wasProbing := st.probing
		before := st.limit
		st.step(w, now, p, float64(probes%3)/2) // jitter 0, 0.5, 1
		if st.probing == 1 && wasProbing == 0 {
			probes++
			probeStarts = append(probeStarts, now)
			assert.GreaterOrEqual(t, float64(st.bound), math.Floor(st.limit*flightProbeDepth), "a bounded probe")
			assert.InDelta(t, before, st.saved, before) // saved is this window's limit
		}
		switch wasProbing {
		case 1:
			assert.Equal(t, 2, st.probing, "the probe's measuring window follows its draining one")
			assert.Equal(t, st.saved, st.limit, "the limit is kept")
		case 2:
			assert.Equal(t, 0, st.probing, "a probe lasts two windows")
			assert.Equal(t, st.saved, st.limit, "the limit comes back after the probe")
		}
	}
	require.GreaterOrEqual(t, probes, 3, "probes happen periodically")
	assert.InDelta(t, 50_000, st.base, 1000, "the probes re-measured the baseline")
	assert.LessOrEqual(t, int(st.limit), 25, "and the limit followed it down")
	// Jitter: the gaps between probes differ, within the period ± 25 %.
	period := float64(flightProbeEvery * p.interval)
	gaps := map[int64]bool{}
	for i := 1; i < len(probeStarts); i++ {
		g := probeStarts[i] - probeStarts[i-1]
		gaps[g] = true
		assert.InDelta(t, period, float64(g), period*flightProbeJitter+float64(3*p.interval), "gap %d", i)
	}
	assert.Greater(t, len(gaps), 1, "jittered: %v", probeStarts)
}

// Windows close when their interval has passed with enough samples, or
// much later with any.
func TestFlightWindowDue(t *testing.T) {
	p := flightParams{interval: 1000, minSamples: flightMinSamples}
	for i, tc := range []struct {
		w   flightWindow
		now int64
		due bool
	}{
		{flightWindow{n: 100, start: 0}, 999, false},
		{flightWindow{n: 100, start: 0}, 1000, true},
		{flightWindow{n: flightMinSamples - 1, start: 0}, 1000, false},
		{flightWindow{n: 0, over: 1, start: 0}, 1000, true},
		{flightWindow{n: 1, start: 0}, flightMaxWait * 1000, true},
		{flightWindow{n: 0, start: 0}, 100 * 1000, false},
	} {
		assert.Equal(t, tc.due, tc.w.due(tc.now, p), "case %d", i)
	}
	// A bound of 1 closes its windows on 2 samples, one of 3 on 6.
	assert.Equal(t, int64(2), minSamples(1))
	assert.Equal(t, int64(6), minSamples(3))
	assert.Equal(t, int64(flightMinSamples), minSamples(50))
	p.minSamples = minSamples(1)
	assert.True(t, flightWindow{n: 2}.due(1000, p), "bound 1: two samples")
}

// A window's latency is the mean of its fastest 99 %, from its buckets: a
// few answers held up (a stalled host) do not lower the bound as they
// would through the mean.
func TestFlightLawTrimmed(t *testing.T) {
	hist := map[int]int64{}
	for range 198 {
		hist[latBucket(50_000)]++
	}
	for range 2 {
		hist[latBucket(2_000_000)]++ // 2 s each: the mean is 69.5 ms
	}
	w := flightWindow{n: 200, sum: 198*50_000 + 2*2_000_000, hist: hist}
	assert.InDelta(t, 50_000, w.typical(), 50_000*0.02, "the stalled 1 %% left out, to a bucket")
	p := flightParams{floor: 1, ceiling: 100, interval: 100_000}
	st := flightState{limit: 20, bound: 20, base: 50_000, why: flightGradient, probeAt: 1 << 60}
	w.held = 20
	st.step(w, 100_000, p, 0.5)
	assert.GreaterOrEqual(t, st.bound, 20, "no queueing in the fastest 99 %%: the bound does not fall")
	assert.Less(t, math.Abs(latOf(latBucket(123_456))-123_456)/123_456, 0.02, "a bucket is within 2 %")
}

// A bound the fleet does not fill is not raised: with 3 of 20 slots held,
// windows without queueing leave it where it is, in slow start or not;
// queueing still lowers it.
func TestFlightLawUnusedBound(t *testing.T) {
	p := flightParams{floor: 1, ceiling: 100, interval: 100_000}
	for _, slow := range []bool{true, false} {
		st := flightState{limit: 20, bound: 20, base: 50_000, why: flightGradient, slow: slow, probeAt: 1 << 60}
		st.step(flightWindow{n: 30, sum: 30 * 50_000, held: 3}, 100_000, p, 0.5)
		assert.Equal(t, 20, st.bound, "slow start %v: not raised", slow)
		st.step(flightWindow{n: 30, sum: 30 * 150_000, held: 3}, 200_000, p, 0.5)
		assert.Less(t, st.bound, 20, "slow start %v: lowered by queueing", slow)
	}
}

// A probe lowers the baseline to what it measured, and raises it by at most
// 10 %: a probe the capacity's fall disturbed does not double it.
func TestFlightProbeBase(t *testing.T) {
	assert.Equal(t, 40_000.0, probeBase(50_000, 40_000))
	assert.Equal(t, 52_000.0, probeBase(50_000, 54_000), "the average")
	assert.InDelta(t, 55_000.0, probeBase(50_000, 100_000), 1e-6, "at most 10 %% more")
	assert.Equal(t, 70_000.0, probeBase(0, 70_000), "the first")
}

// One window over the dead band (a host's stall) lowers nothing; a second
// in a row does, and a jump past the calm factor (the capacity fell) is
// followed at once.
func TestFlightLawOneStall(t *testing.T) {
	p := flightParams{floor: 1, ceiling: 100, interval: 100_000}
	st := flightState{limit: 20, bound: 20, base: 50_000, why: flightGradient, probeAt: 1 << 60}
	slow := flightWindow{n: 40, sum: 40 * 60_000, held: 20} // 1.2 × the baseline
	st.step(slow, 100_000, p, 0.5)
	assert.Equal(t, 20, st.bound, "one window over the band")
	st.step(slow, 200_000, p, 0.5)
	assert.Less(t, st.bound, 20, "two in a row")

	st = flightState{limit: 20, bound: 20, base: 50_000, why: flightGradient, probeAt: 1 << 60}
	st.step(flightWindow{n: 40, sum: 40 * 125_000, held: 20}, 100_000, p, 0.5)
	assert.Less(t, st.bound, 20, "2.5 × the baseline: at once")
}

// Slow start survives one slow window; two end it.
func TestFlightLawSlowStartStall(t *testing.T) {
	p := flightParams{floor: 1, ceiling: 100, interval: 100_000}
	st := flightState{limit: 4, bound: 4, base: 50_000, why: flightSlow, slow: true, probeAt: 1 << 60}
	stall := flightWindow{n: 20, sum: 20 * 70_000, held: 4}
	st.step(stall, 100_000, p, 0.5)
	assert.True(t, st.slow, "one stall")
	assert.Equal(t, 4, st.bound)
	st.step(flightWindow{n: 20, sum: 20 * 50_000, held: 4}, 200_000, p, 0.5)
	assert.Equal(t, 8, st.bound, "doubling again")
	st.step(stall, 300_000, p, 0.5)
	st.step(stall, 400_000, p, 0.5)
	assert.False(t, st.slow, "two in a row end it")
}

// TestFlightProbeDuringADrop: a probe whose measuring window still saw a
// queue (the capacity fell while it ran) leaves the baseline as it was;
// at the floor, where nothing is left to drain, the same reading raises it
// (by at most flightBaseRise), so a baseline that truly rose is learned.
func TestFlightProbeDuringADrop(t *testing.T) {
	p := flightParams{floor: 1, ceiling: 200, interval: 250_000, minSamples: 8}
	queued := flightWindow{n: 10, sum: 10 * 106_000, held: 17}

	s := flightState{limit: 23, bound: 17, base: 51_000, probing: 2, saved: 23, why: flightProbe}
	s.step(queued, 10_000_000, p, 0.5)
	assert.Equal(t, 51_000.0, s.base, "a probe in a transient measured the queue")
	assert.Zero(t, s.probing, "the probe ended")

	s = flightState{limit: 1, bound: 1, base: 51_000, probing: 2, saved: 1, why: flightProbe}
	s.step(queued, 10_000_000, p, 0.5)
	assert.InDelta(t, 51_000*(1+flightBaseRise), s.base, 1e-6, "at the floor the baseline follows, by at most the rise")

	calm := flightWindow{n: 10, sum: 10 * 54_000, held: 17}
	s = flightState{limit: 23, bound: 17, base: 51_000, probing: 2, saved: 23, why: flightProbe}
	s.step(calm, 10_000_000, p, 0.5)
	assert.Equal(t, 52_500.0, s.base, "a calm probe moves the baseline as before")
}
