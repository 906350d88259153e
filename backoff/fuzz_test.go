package backoff_test

import (
	"errors"
	"math"
	"net/http"
	"strings"
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

// FuzzParseAnswer feeds ParseAnswer any status, header (lines of
// "name: value") and body: it never panics, and what it returns stays in
// range.
func FuzzParseAnswer(f *testing.F) {
	seeds := []struct {
		status int
		fields string
		body   string
	}{
		{200, "RateLimit-Policy: \"default\";q=100;w=60\nRateLimit: \"default\";r=40;t=30", ""},
		{200, "x-ratelimit-limit-requests: 60\nx-ratelimit-remaining-requests: 59\nx-ratelimit-reset-requests: 1s\nx-ratelimit-reset-tokens: 1m30.5s", ""},
		{429, "anthropic-ratelimit-tokens-remaining: 0\nanthropic-ratelimit-tokens-reset: 2026-03-14T12:00:07Z\nretry-after: 7", ""},
		{403, "x-ratelimit-remaining: 0\nx-ratelimit-reset: 1773489642\nx-ratelimit-used: 5000\nx-ratelimit-resource: core", "{}"},
		{429, "X-RateLimit-Reset-After: 1.234", `{"retry_after": 0.64, "global": false}`},
		{429, "X-Shopify-Shop-Api-Call-Limit: 40/40\nRetry-After: 2.0", ""},
		{503, "retry-after-ms: 99999999999999999999999", "{\"retry_after\": 1e400}"},
		{429, "x-ratelimit-reset-tokens: -6m\nRateLimit-Policy: ;q=;w=\nX-Shopify-Shop-Api-Call-Limit: 1/0", `{"retry_after":`},
	}
	for _, s := range seeds {
		f.Add(s.status, s.fields, s.body, now.Unix())
	}
	f.Fuzz(func(t *testing.T, status int, fields, body string, nowUnix int64) {
		h := http.Header{}
		for _, line := range strings.Split(fields, "\n") {
			if name, value, ok := strings.Cut(line, ":"); ok {
				h.Add(name, strings.TrimSpace(value))
			}
		}
		a := backoff.ParseAnswer(status, h, []byte(body), time.Unix(nowUnix, 0))
		inRange := func(d time.Duration) bool { return d >= 0 && d <= backoff.MaxRetryAfter }
		if !inRange(a.Wait) || (!a.WaitSaid && a.Wait != 0) || (!a.Refused && a.WaitSaid) {
			t.Fatalf("wait %v (said %v, refused %v)", a.Wait, a.WaitSaid, a.Refused)
		}
		if a.Refused && status != 429 && status != 503 && status != 403 {
			t.Fatalf("status %d refused", status)
		}
		for _, q := range a.Quotas {
			for _, f := range []float64{q.Limit, q.Remaining, q.Rate} {
				if math.IsNaN(f) || f < 0 {
					t.Fatalf("quota %+v: a number out of range", q)
				}
			}
			if math.IsInf(q.Rate, 0) || !inRange(q.Reset) || q.Window < 0 {
				t.Fatalf("quota %+v: out of range", q)
			}
		}
		for _, err := range a.Problems {
			if !errors.Is(err, backoff.ErrMalformed) {
				t.Fatalf("problem %v does not wrap ErrMalformed", err)
			}
		}
		if d, cool, ok := (backoff.UpstreamRule{}).Answer(a, 1); ok != a.Refused || !inRange(d) || (cool && !ok) {
			t.Fatalf("rule: %v %v %v for %+v", d, cool, ok, a)
		}
	})
}
