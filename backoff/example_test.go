package backoff_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/backoff"
)

func ExampleExponential_Delay() {
	policy := backoff.Exponential{
		Base:   100 * time.Millisecond,
		Max:    time.Second,
		Factor: 2,
	}
	if err := policy.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	for attempt := 0; attempt < 6; attempt++ {
		fmt.Println(attempt, policy.Delay(attempt))
	}
	// Output:
	// 0 100ms
	// 1 200ms
	// 2 400ms
	// 3 800ms
	// 4 1s
	// 5 1s
}

func ExampleExponential_Delay_fullJitter() {
	policy := backoff.Exponential{
		Base:   100 * time.Millisecond,
		Max:    time.Second,
		Jitter: backoff.FullJitter,
		// A fixed draw makes the output repeatable; leave Rand nil in real
		// code.
		Rand: backoff.SourceFunc(func() float64 { return 0.25 }),
	}
	for attempt := 0; attempt < 6; attempt++ {
		fmt.Println(attempt, policy.Delay(attempt))
	}
	// Output:
	// 0 25ms
	// 1 50ms
	// 2 100ms
	// 3 200ms
	// 4 250ms
	// 5 250ms
}

func ExampleDecorrelated_Next() {
	policy := backoff.Decorrelated{
		Base: 100 * time.Millisecond,
		Max:  2 * time.Second,
		Rand: backoff.SourceFunc(func() float64 { return 0.5 }),
	}
	var delay time.Duration // 0: no retry yet
	for attempt := 0; attempt < 5; attempt++ {
		delay = policy.Next(delay)
		fmt.Println(attempt, delay)
	}
	// Output:
	// 0 200ms
	// 1 350ms
	// 2 575ms
	// 3 912.5ms
	// 4 1.05s
}

func ExampleParseRetryAfter() {
	received := time.Date(2026, time.March, 14, 12, 0, 0, 0, time.UTC)
	for _, value := range []string{
		"120",
		"Sat, 14 Mar 2026 12:00:45 GMT",
		"Sat, 14 Mar 2026 11:00:00 GMT",
		"31536000",
		"soon",
	} {
		d, err := backoff.ParseRetryAfter(value, received)
		if errors.Is(err, backoff.ErrInvalidRetryAfter) {
			fmt.Println("error:", err)
			continue
		}
		fmt.Println(d)
	}
	// Output:
	// 2m0s
	// 45s
	// 0s
	// 24h0m0s
	// error: backoff: invalid Retry-After: "soon" is neither delta-seconds nor an HTTP-date
}

func ExampleRetryAfterFromHeader() {
	resp := &http.Response{
		StatusCode: http.StatusTooManyRequests,
		Header:     http.Header{"Retry-After": {"30"}},
	}
	d, ok, err := backoff.RetryAfterFromHeader(resp.Header, time.Now())
	switch {
	case err != nil:
		fmt.Println("malformed:", err)
	case !ok:
		fmt.Println("no Retry-After: use the backoff policy")
	default:
		fmt.Println("wait", d)
	}
	// Output: wait 30s
}

func ExampleParseAnswer() {
	// GitHub's answer to a spent primary quota: a 403 that is a throttle.
	h := http.Header{}
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", "1773489642")
	h.Set("X-RateLimit-Resource", "core")
	received := time.Unix(1773489600, 0)

	a := backoff.ParseAnswer(http.StatusForbidden, h, nil, received)
	q, _ := a.Quota(backoff.Requests)
	fmt.Println(q.Name, q.Limit, q.Exhausted, q.Reset)
	d, cool, refused := backoff.UpstreamRule{}.Answer(a, 0)
	fmt.Println(refused, cool, d)
	// Output:
	// core 5000 true 42s
	// true true 42s
}
