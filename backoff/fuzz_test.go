package backoff_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backoff"
)

func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []string{
		"0", "120", " 5 ", "\t7\t", "-1", "1.5", "+5", "", "abc",
		"99999999999999999999999", "9223372036854775808",
		"Sat, 14 Mar 2026 12:02:00 GMT",
		"Saturday, 14-Mar-26 12:02:00 GMT",
		"Sat Mar 14 12:02:00 2026",
		"Sun Mar  1 12:00:00 2026",
		"Sat, 14 Mar 2026 25:02:00 GMT",
		"Fri, 31 Dec 9999 23:59:59 GMT",
		"Mon, 01 Jan 0001 00:00:00 GMT",
	} {
		f.Add(seed, now.Unix())
	}
	f.Add("Sat, 14 Mar 2026 12:02:00 GMT", int64(math.MinInt64))
	f.Add("Sat, 14 Mar 2026 12:02:00 GMT", int64(math.MaxInt64))

	f.Fuzz(func(t *testing.T, value string, nowUnix int64) {
		at := time.Unix(nowUnix, 0)
		d, err := backoff.ParseRetryAfter(value, at)
		if err != nil {
			if !errors.Is(err, backoff.ErrInvalidRetryAfter) {
				t.Fatalf("ParseRetryAfter(%q): error %v does not wrap ErrInvalidRetryAfter", value, err)
			}
			if d != 0 {
				t.Fatalf("ParseRetryAfter(%q): delay %v with error %v", value, d, err)
			}
			return
		}
		if d < 0 || d > backoff.MaxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v, outside [0, %v]", value, d, backoff.MaxRetryAfter)
		}
		// Optional whitespace around a valid value changes nothing.
		d2, err := backoff.ParseRetryAfter(" \t"+value+"\t ", at)
		if err != nil || d2 != d {
			t.Fatalf("ParseRetryAfter with OWS around %q = %v, %v; want %v, nil", value, d2, err, d)
		}
	})
}

func FuzzExponentialDelay(f *testing.F) {
	f.Add(int64(time.Millisecond), int64(time.Second), 2.0, 5, 0.5)
	f.Add(int64(1), int64(0), 1e300, math.MaxInt, 0.999)
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), math.Inf(1), 3, 1.0)
	f.Add(int64(-5), int64(-5), math.NaN(), -7, math.NaN())

	f.Fuzz(func(t *testing.T, base, maxDelay int64, factor float64, attempt int, r float64) {
		for _, jitter := range []backoff.Jitter{backoff.NoJitter, backoff.FullJitter} {
			e := backoff.Exponential{
				Base:   time.Duration(base),
				Max:    time.Duration(maxDelay),
				Factor: factor,
				Jitter: jitter,
				Rand:   fixed(r),
			}
			limit := e.Max
			if limit <= 0 {
				limit = backoff.MaxDelay
			}
			if d := e.Delay(attempt); d < 0 || d > limit {
				t.Fatalf("%+v.Delay(%d) = %v, outside [0, %v]", e, attempt, d, limit)
			}
		}
	})
}

func FuzzDecorrelatedNext(f *testing.F) {
	f.Add(int64(time.Millisecond), int64(time.Second), int64(0), 0.5)
	f.Add(int64(time.Second), int64(0), int64(math.MaxInt64), 0.999)
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), 1.0)

	f.Fuzz(func(t *testing.T, base, maxDelay, prev int64, r float64) {
		d := backoff.Decorrelated{Base: time.Duration(base), Max: time.Duration(maxDelay), Rand: fixed(r)}
		got := d.Next(time.Duration(prev))
		if d.Validate() != nil {
			if got < 0 {
				t.Fatalf("%+v.Next(%d) = %v, negative", d, prev, got)
			}
			return
		}
		limit := d.Max
		if limit == 0 {
			limit = backoff.MaxDelay
		}
		upper := limit
		if p := max(time.Duration(prev), d.Base); p < limit/3 {
			upper = 3 * p
		}
		if got < d.Base || got > upper {
			t.Fatalf("%+v.Next(%d) = %v, outside [%v, %v]", d, prev, got, d.Base, upper)
		}
	})
}
