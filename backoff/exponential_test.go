package backoff_test

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/backoff"
)

func TestExponentialNoJitterSequence(t *testing.T) {
	e := backoff.Exponential{Base: 100 * time.Millisecond, Factor: 2, Max: time.Second}
	require.NoError(t, e.Validate())

	want := []time.Duration{
		100 * time.Millisecond,
		200 * time.Millisecond,
		400 * time.Millisecond,
		800 * time.Millisecond,
		time.Second,
		time.Second,
		time.Second,
		time.Second,
	}
	for attempt, w := range want {
		assert.Equal(t, w, e.Delay(attempt), "attempt %d", attempt)
	}
}

func TestExponentialDefaultsAndFactors(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name    string
		e       backoff.Exponential
		attempt int
		want    time.Duration
	}{
		{"factor 0 means 2", backoff.Exponential{Base: 100 * ms}, 3, 800 * ms},
		{"max 0 means MaxDelay", backoff.Exponential{Base: time.Second}, 40, backoff.MaxDelay},
		{"max 0 below MaxDelay", backoff.Exponential{Base: time.Second}, 10, 1024 * time.Second},
		{"factor 1 is constant", backoff.Exponential{Base: 300 * ms, Factor: 1}, 50, 300 * ms},
		{"factor 1.5", backoff.Exponential{Base: 100 * ms, Factor: 1.5}, 3, 337500 * time.Microsecond},
		{"factor 10", backoff.Exponential{Base: ms, Factor: 10, Max: time.Minute}, 4, 10 * time.Second},
		{"negative attempt is 0", backoff.Exponential{Base: 100 * ms}, -1, 100 * ms},
		{"most negative attempt is 0", backoff.Exponential{Base: 100 * ms}, math.MinInt, 100 * ms},
		{"base above max gives max", backoff.Exponential{Base: time.Minute, Max: time.Second}, 0, time.Second},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, tc.e.Delay(tc.attempt), "case %s", tc.name)
	}
}

func TestExponentialFullJitterFixedSource(t *testing.T) {
	cases := []struct {
		r       float64
		attempt int
		want    time.Duration
	}{
		{0, 0, 0},
		{0.5, 0, 50 * time.Millisecond},
		{0.25, 3, 200 * time.Millisecond},
		{0.75, 2, 300 * time.Millisecond},
		{0.5, 9, 500 * time.Millisecond}, // capped to 1s, then jittered
	}
	for i, tc := range cases {
		e := backoff.Exponential{
			Base:   100 * time.Millisecond,
			Max:    time.Second,
			Jitter: backoff.FullJitter,
			Rand:   fixed(tc.r),
		}
		assert.Equal(t, tc.want, e.Delay(tc.attempt), "case %d: r=%v attempt=%d", i, tc.r, tc.attempt)
	}
}

func TestExponentialFullJitterBounds(t *testing.T) {
	e := backoff.Exponential{Base: 10 * time.Millisecond, Max: 5 * time.Second, Jitter: backoff.FullJitter}
	nominal := backoff.Exponential{Base: e.Base, Max: e.Max}
	for attempt := 0; attempt < 15; attempt++ {
		upper := nominal.Delay(attempt)
		var sum time.Duration
		const draws = 2000
		for i := 0; i < draws; i++ {
			d := e.Delay(attempt)
			assert.GreaterOrEqual(t, d, time.Duration(0), "attempt %d draw %d", attempt, i)
			assert.LessOrEqual(t, d, upper, "attempt %d draw %d", attempt, i)
			sum += d
		}
		// Uniform on [0, upper]: the mean is upper/2. A loose band catches a
		// broken source without making the test flaky.
		mean := sum / draws
		assert.InDelta(t, float64(upper)/2, float64(mean), float64(upper)/10, "attempt %d mean", attempt)
	}
}

func TestExponentialNeverOverflows(t *testing.T) {
	const maxDur = time.Duration(math.MaxInt64)
	cases := []struct {
		name    string
		e       backoff.Exponential
		attempt int
		want    time.Duration
	}{
		{"attempt 64", backoff.Exponential{Base: time.Second, Max: time.Hour}, 64, time.Hour},
		{"attempt 1000", backoff.Exponential{Base: time.Second, Max: time.Hour}, 1000, time.Hour},
		{"attempt 1e9", backoff.Exponential{Base: time.Second, Max: time.Hour}, 1e9, time.Hour},
		{"attempt MaxInt", backoff.Exponential{Base: time.Second, Max: time.Hour}, math.MaxInt, time.Hour},
		{"attempt 64 no max", backoff.Exponential{Base: time.Second}, 64, backoff.MaxDelay},
		{"attempt MaxInt no max", backoff.Exponential{Base: time.Nanosecond}, math.MaxInt, backoff.MaxDelay},
		{"factor 1e300", backoff.Exponential{Base: time.Second, Factor: 1e300, Max: time.Hour}, 2, time.Hour},
		{"factor 1e300 no max", backoff.Exponential{Base: time.Second, Factor: 1e300}, 1, backoff.MaxDelay},
		{"factor MaxFloat64", backoff.Exponential{Base: time.Second, Factor: math.MaxFloat64}, math.MaxInt, backoff.MaxDelay},
		{"factor +Inf", backoff.Exponential{Base: time.Second, Factor: math.Inf(1), Max: time.Hour}, 1, time.Hour},
		{"max MaxInt64", backoff.Exponential{Base: time.Second, Max: maxDur}, math.MaxInt, maxDur},
		{"base MaxInt64", backoff.Exponential{Base: maxDur, Max: maxDur}, 1, maxDur},
		{"base MaxInt64 no max", backoff.Exponential{Base: maxDur}, 0, backoff.MaxDelay},
	}
	for _, tc := range cases {
		got := tc.e.Delay(tc.attempt)
		assert.Equal(t, tc.want, got, "case %s", tc.name)
		assert.Positive(t, got, "case %s", tc.name)

		tc.e.Jitter = backoff.FullJitter
		tc.e.Rand = fixed(math.Nextafter(1, 0))
		got = tc.e.Delay(tc.attempt)
		assert.Positive(t, got, "case %s, jittered", tc.name)
		assert.LessOrEqual(t, got, tc.want, "case %s, jittered", tc.name)
	}
}

func TestExponentialInvalidDoesNotPanic(t *testing.T) {
	cases := []struct {
		name string
		e    backoff.Exponential
		want time.Duration
	}{
		{"zero value", backoff.Exponential{}, 0},
		{"negative base", backoff.Exponential{Base: -time.Second}, 0},
		{"NaN factor is constant", backoff.Exponential{Base: time.Second, Factor: math.NaN()}, time.Second},
		{"factor below 1 is constant", backoff.Exponential{Base: time.Second, Factor: 0.5}, time.Second},
		{"negative max means MaxDelay", backoff.Exponential{Base: time.Second, Max: -1}, 8 * time.Second},
		{"unknown jitter is none", backoff.Exponential{Base: time.Second, Jitter: 9}, 8 * time.Second},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, tc.e.Delay(3), "case %s", tc.name)
		assert.Error(t, tc.e.Validate(), "case %s", tc.name)
	}
}

func TestExponentialValidate(t *testing.T) {
	cases := []struct {
		name    string
		e       backoff.Exponential
		wantErr bool
	}{
		{"minimal", backoff.Exponential{Base: time.Millisecond}, false},
		{"full", backoff.Exponential{Base: time.Millisecond, Max: time.Second, Factor: 1.5, Jitter: backoff.FullJitter, Rand: fixed(0.5)}, false},
		{"factor 1", backoff.Exponential{Base: time.Millisecond, Factor: 1}, false},
		{"max equals base", backoff.Exponential{Base: time.Second, Max: time.Second}, false},
		{"base at MaxDelay", backoff.Exponential{Base: backoff.MaxDelay}, false},
		{"max above MaxDelay", backoff.Exponential{Base: time.Second, Max: 48 * time.Hour}, false},

		{"zero base", backoff.Exponential{}, true},
		{"negative base", backoff.Exponential{Base: -time.Second}, true},
		{"negative max", backoff.Exponential{Base: time.Second, Max: -time.Second}, true},
		{"max below base", backoff.Exponential{Base: time.Second, Max: time.Millisecond}, true},
		{"base above MaxDelay", backoff.Exponential{Base: backoff.MaxDelay + 1}, true},
		{"factor 0.5", backoff.Exponential{Base: time.Second, Factor: 0.5}, true},
		{"factor just below 1", backoff.Exponential{Base: time.Second, Factor: math.Nextafter(1, 0)}, true},
		{"negative factor", backoff.Exponential{Base: time.Second, Factor: -2}, true},
		{"NaN factor", backoff.Exponential{Base: time.Second, Factor: math.NaN()}, true},
		{"+Inf factor", backoff.Exponential{Base: time.Second, Factor: math.Inf(1)}, true},
		{"-Inf factor", backoff.Exponential{Base: time.Second, Factor: math.Inf(-1)}, true},
		{"unknown jitter", backoff.Exponential{Base: time.Second, Jitter: 2}, true},
	}
	for _, tc := range cases {
		err := tc.e.Validate()
		if !tc.wantErr {
			assert.NoError(t, err, "case %s", tc.name)
			continue
		}
		assert.True(t, errors.Is(err, backoff.ErrInvalidPolicy), "case %s: err = %v", tc.name, err)
	}
}

// Run with -race: the default source and the value receiver are safe to
// share.
func TestExponentialConcurrentUse(t *testing.T) {
	e := backoff.Exponential{Base: time.Millisecond, Max: time.Second, Jitter: backoff.FullJitter}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				d := e.Delay(i % 20)
				if d < 0 || d > time.Second {
					t.Errorf("goroutine %d draw %d: delay %v out of [0, 1s]", g, i, d)
					return
				}
			}
		}()
	}
	wg.Wait()
}
