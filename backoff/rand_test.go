package backoff_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/backoff"
)

func fixed(r float64) backoff.Source {
	return backoff.SourceFunc(func() float64 { return r })
}

func TestSourceFunc(t *testing.T) {
	calls := 0
	src := backoff.SourceFunc(func() float64 { calls++; return 0.25 })
	assert.Equal(t, 0.25, src.Float64())
	assert.Equal(t, 1, calls)
}

// A Source that breaks its contract must not push a delay outside its bounds.
func TestOutOfRangeSourceIsClamped(t *testing.T) {
	const d = 800 * time.Millisecond
	cases := []struct {
		name string
		r    float64
		want time.Duration // -1: anything in (d - 1µs, d]
	}{
		{"NaN", math.NaN(), 0},
		{"negative", -0.5, 0},
		{"-Inf", math.Inf(-1), 0},
		{"one", 1, -1},
		{"above one", 2, -1},
		{"+Inf", math.Inf(1), -1},
	}
	for _, tc := range cases {
		e := backoff.Exponential{Base: d, Max: d, Jitter: backoff.FullJitter, Rand: fixed(tc.r)}
		got := e.Delay(0)
		if tc.want >= 0 {
			assert.Equal(t, tc.want, got, "case %s", tc.name)
			continue
		}
		assert.LessOrEqual(t, got, d, "case %s", tc.name)
		assert.Greater(t, got, d-time.Microsecond, "case %s", tc.name)
	}
}
