package backoff_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/backoff"
)

func TestDecorrelatedFixedSource(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name string
		max  time.Duration
		r    float64
		prev time.Duration
		want time.Duration
	}{
		{"first, r=0", 0, 0, 0, 100 * ms},
		{"first, r=0.5", 0, 0.5, 0, 200 * ms}, // 100 + 0.5·(300-100)
		{"prev below base is first", 0, 0.5, 10 * ms, 200 * ms},
		{"prev 1s, r=0.5", 0, 0.5, time.Second, 1550 * ms},                      // 100 + 0.5·(3000-100)
		{"prev 1s, capped at 2s", 2 * time.Second, 0.5, time.Second, 1050 * ms}, // 100 + 0.5·(2000-100)
		{"negative prev is first", 0, 0, -time.Hour, 100 * ms},
	}
	for _, tc := range cases {
		d := backoff.Decorrelated{Base: 100 * ms, Max: tc.max, Rand: fixed(tc.r)}
		require.NoError(t, d.Validate(), "case %s", tc.name)
		assert.Equal(t, tc.want, d.Next(tc.prev), "case %s", tc.name)
	}
}

func TestDecorrelatedBounds(t *testing.T) {
	d := backoff.Decorrelated{Base: 10 * time.Millisecond, Max: 10 * time.Second}
	require.NoError(t, d.Validate())
	// Many chains from the first attempt, each long enough to reach the cap.
	for chain := 0; chain < 200; chain++ {
		var prev time.Duration
		for step := 0; step < 40; step++ {
			upper := min(d.Max, 3*max(prev, d.Base))
			got := d.Next(prev)
			assert.GreaterOrEqual(t, got, d.Base, "chain %d step %d prev %v", chain, step, prev)
			assert.LessOrEqual(t, got, upper, "chain %d step %d prev %v", chain, step, prev)
			prev = got
		}
	}
}

// With the random draw fixed, a longer previous delay never gives a shorter
// next one, and nothing passes the cap.
func TestDecorrelatedMonotonicCap(t *testing.T) {
	for _, r := range []float64{0, 0.3, 0.9, math.Nextafter(1, 0)} {
		d := backoff.Decorrelated{Base: time.Millisecond, Max: time.Minute, Rand: fixed(r)}
		last := time.Duration(0)
		for prev := time.Duration(0); prev < 10*time.Minute; prev = prev*2 + time.Millisecond {
			got := d.Next(prev)
			assert.GreaterOrEqual(t, got, last, "r=%v prev=%v", r, prev)
			assert.LessOrEqual(t, got, d.Max, "r=%v prev=%v", r, prev)
			last = got
		}
		// Once 3·prev passes the cap, prev no longer matters.
		assert.Equal(t, d.Next(d.Max), d.Next(math.MaxInt64), "r=%v", r)
	}
}

func TestDecorrelatedNeverOverflows(t *testing.T) {
	const maxDur = time.Duration(math.MaxInt64)
	cases := []struct {
		name  string
		d     backoff.Decorrelated
		prev  time.Duration
		upper time.Duration
	}{
		{"prev MaxInt64, no max", backoff.Decorrelated{Base: time.Second}, maxDur, backoff.MaxDelay},
		{"prev MaxInt64-1, no max", backoff.Decorrelated{Base: time.Second}, maxDur - 1, backoff.MaxDelay},
		{"prev MaxInt64/3+1", backoff.Decorrelated{Base: time.Second, Max: time.Hour}, maxDur/3 + 1, time.Hour},
		{"prev and max MaxInt64", backoff.Decorrelated{Base: time.Second, Max: maxDur}, maxDur, maxDur},
		{"base, prev and max MaxInt64", backoff.Decorrelated{Base: maxDur, Max: maxDur}, maxDur, maxDur},
	}
	for _, tc := range cases {
		for _, r := range []float64{0, 0.5, math.Nextafter(1, 0)} {
			tc.d.Rand = fixed(r)
			got := tc.d.Next(tc.prev)
			assert.GreaterOrEqual(t, got, min(tc.d.Base, tc.upper), "case %s r=%v", tc.name, r)
			assert.LessOrEqual(t, got, tc.upper, "case %s r=%v", tc.name, r)
		}
	}
}

func TestDecorrelatedInvalidDoesNotPanic(t *testing.T) {
	assert.Equal(t, time.Duration(0), backoff.Decorrelated{}.Next(time.Second), "zero value")
	assert.Equal(t, time.Duration(0), backoff.Decorrelated{Base: -1}.Next(time.Second), "negative base")
	assert.Equal(t, time.Second, backoff.Decorrelated{Base: time.Minute, Max: time.Second}.Next(0), "base above max")
}

func TestDecorrelatedValidate(t *testing.T) {
	cases := []struct {
		name    string
		d       backoff.Decorrelated
		wantErr bool
	}{
		{"minimal", backoff.Decorrelated{Base: time.Millisecond}, false},
		{"with max", backoff.Decorrelated{Base: time.Millisecond, Max: time.Second, Rand: fixed(0.1)}, false},
		{"max equals base", backoff.Decorrelated{Base: time.Second, Max: time.Second}, false},

		{"zero value", backoff.Decorrelated{}, true},
		{"negative base", backoff.Decorrelated{Base: -time.Second}, true},
		{"negative max", backoff.Decorrelated{Base: time.Second, Max: -1}, true},
		{"max below base", backoff.Decorrelated{Base: time.Second, Max: time.Millisecond}, true},
		{"base above MaxDelay", backoff.Decorrelated{Base: backoff.MaxDelay + 1}, true},
	}
	for _, tc := range cases {
		err := tc.d.Validate()
		if !tc.wantErr {
			assert.NoError(t, err, "case %s", tc.name)
			continue
		}
		assert.True(t, errors.Is(err, backoff.ErrInvalidPolicy), "case %s: err = %v", tc.name, err)
	}
}
