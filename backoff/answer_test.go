package backoff_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/backoff"
)

// header builds a header from name, value pairs, as an upstream writes it
// (any case: Add canonicalises the names).
func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// TestParseAnswerDialects reads one real-shaped answer of each dialect. now
// is 2026-03-14 12:00:00 UTC (Unix 1773489600).
func TestParseAnswerDialects(t *testing.T) {
	req := func(q backoff.Quota) backoff.Quota { q.Resource = backoff.Requests; return q }
	tok := func(q backoff.Quota) backoff.Quota { q.Resource = backoff.Tokens; return q }
	cases := []struct {
		name     string
		status   int
		h        http.Header
		body     string
		quotas   []backoff.Quota
		refused  bool
		wait     time.Duration
		waitSaid bool
		problems int
	}{
		{
			name:   "IETF, a success",
			status: 200,
			h:      header("RateLimit-Policy", `"default";q=100;w=60`, "RateLimit", `"default";r=40;t=30`),
			quotas: []backoff.Quota{req(backoff.Quota{Name: "default", Limit: 100, Remaining: 40, Window: time.Minute, Rate: 100.0 / 60, Reset: 30 * time.Second})},
		},
		{
			name:   "IETF, the older trio",
			status: 200,
			h:      header("RateLimit-Limit", "10", "RateLimit-Remaining", "6", "RateLimit-Reset", "3"),
			quotas: []backoff.Quota{req(backoff.Quota{Limit: 10, Remaining: 6, Rate: 2, Reset: 3 * time.Second})},
		},
		{
			name:   "X-RateLimit, reset in delta seconds",
			status: 200,
			h:      header("X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "30", "X-RateLimit-Reset", "3"),
			quotas: []backoff.Quota{req(backoff.Quota{Limit: 100, Remaining: 30, Rate: 10, Reset: 3 * time.Second})},
		},
		{
			name:   "OpenAI, requests and tokens",
			status: 200,
			h: header(
				"x-ratelimit-limit-requests", "60", "x-ratelimit-remaining-requests", "59", "x-ratelimit-reset-requests", "1s",
				"x-ratelimit-limit-tokens", "150000", "x-ratelimit-remaining-tokens", "149984", "x-ratelimit-reset-tokens", "6ms"),
			quotas: []backoff.Quota{
				req(backoff.Quota{Limit: 60, Remaining: 59, Reset: time.Second}), // one used: no rate
				tok(backoff.Quota{Limit: 150000, Remaining: 149984, Rate: 15 / 0.006, Reset: 6 * time.Millisecond}),
			},
		},
		{
			name:   "OpenAI, a 429 on tokens: reset 6m0s, 1m30.5s",
			status: 429,
			h: header(
				"x-ratelimit-limit-requests", "10000", "x-ratelimit-remaining-requests", "9000", "x-ratelimit-reset-requests", "1m30.5s",
				"x-ratelimit-limit-tokens", "90000", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "6m0s"),
			quotas: []backoff.Quota{
				req(backoff.Quota{Limit: 10000, Remaining: 9000, Rate: 999 / 90.5, Reset: 90500 * time.Millisecond}),
				tok(backoff.Quota{Limit: 90000, Exhausted: true, Rate: 89999.0 / 360, Reset: 6 * time.Minute}),
			},
			refused: true, wait: 6 * time.Minute, waitSaid: true, // the spent quota's reset
		},
		{
			name:   "OpenAI, retry-after-ms wins over Retry-After",
			status: 429,
			h:      header("retry-after-ms", "120", "retry-after", "1", "x-ratelimit-reset-requests", "120ms"),
			quotas: []backoff.Quota{
				req(backoff.Quota{Reset: 120 * time.Millisecond}),
			},
			refused: true, wait: 120 * time.Millisecond, waitSaid: true,
		},
		{
			name:   "Anthropic, four resources",
			status: 200,
			h: header(
				"anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49", "anthropic-ratelimit-requests-reset", "2026-03-14T12:00:02Z",
				"anthropic-ratelimit-tokens-limit", "90000", "anthropic-ratelimit-tokens-remaining", "87000", "anthropic-ratelimit-tokens-reset", "2026-03-14T12:00:03Z",
				"anthropic-ratelimit-input-tokens-limit", "40000", "anthropic-ratelimit-input-tokens-remaining", "39000", "anthropic-ratelimit-input-tokens-reset", "2026-03-14T12:00:01Z",
				"anthropic-ratelimit-output-tokens-limit", "8000", "anthropic-ratelimit-output-tokens-remaining", "0", "anthropic-ratelimit-output-tokens-reset", "2026-03-14T12:00:07Z"),
			quotas: []backoff.Quota{
				req(backoff.Quota{Limit: 50, Remaining: 49, Reset: 2 * time.Second}),                         // one used: no rate
				tok(backoff.Quota{Limit: 90000, Remaining: 87000, Rate: 2999.0 / 4, Reset: 3 * time.Second}), // the instant may be a second early
				// a reset within two seconds, written to the second: no rate
				{Resource: backoff.InputTokens, Limit: 40000, Remaining: 39000, Reset: time.Second},
				{Resource: backoff.OutputTokens, Limit: 8000, Exhausted: true, Rate: 7999.0 / 8, Reset: 7 * time.Second},
			},
		},
		{
			name:   "Anthropic, a 429 with Retry-After",
			status: 429,
			h: header("retry-after", "7",
				"anthropic-ratelimit-output-tokens-limit", "8000", "anthropic-ratelimit-output-tokens-remaining", "0", "anthropic-ratelimit-output-tokens-reset", "2026-03-14T12:00:07Z"),
			quotas:  []backoff.Quota{{Resource: backoff.OutputTokens, Limit: 8000, Exhausted: true, Rate: 7999.0 / 8, Reset: 7 * time.Second}},
			refused: true, wait: 7 * time.Second, waitSaid: true,
		},
		{
			name:   "GitHub, a success",
			status: 200,
			h: header("x-ratelimit-limit", "5000", "x-ratelimit-remaining", "4999", "x-ratelimit-used", "1",
				"x-ratelimit-reset", "1773493200", "x-ratelimit-resource", "core"),
			quotas: []backoff.Quota{req(backoff.Quota{Name: "core", Limit: 5000, Remaining: 4999, Rate: 4999.0 / 3600, Reset: time.Hour})},
		},
		{
			name:   "GitHub, primary limit: a 403 with remaining 0 is a throttle until the reset",
			status: 403,
			h: header("x-ratelimit-limit", "5000", "x-ratelimit-remaining", "0", "x-ratelimit-used", "5000",
				"x-ratelimit-reset", "1773489642", "x-ratelimit-resource", "core"),
			body:    `{"message":"API rate limit exceeded for user ID 1.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`,
			quotas:  []backoff.Quota{req(backoff.Quota{Name: "core", Limit: 5000, Exhausted: true, Reset: 42 * time.Second})},
			refused: true, wait: 42 * time.Second, waitSaid: true,
		},
		{
			name:    "GitHub, secondary limit: a 403 with Retry-After",
			status:  403,
			h:       header("retry-after", "60", "x-ratelimit-limit", "5000", "x-ratelimit-remaining", "4000", "x-ratelimit-reset", "1773489900"),
			quotas:  []backoff.Quota{req(backoff.Quota{Limit: 5000, Remaining: 4000, Rate: 4000.0 / 300, Reset: 5 * time.Minute})},
			refused: true, wait: time.Minute, waitSaid: true,
		},
		{
			name:   "GitHub, a used count without remaining",
			status: 200,
			h:      header("x-ratelimit-limit", "60", "x-ratelimit-used", "60"),
			quotas: []backoff.Quota{req(backoff.Quota{Limit: 60, Exhausted: true})},
		},
		{
			name:   "a 403 without them stays a client error",
			status: 403,
			h:      header("x-ratelimit-limit", "5000", "x-ratelimit-remaining", "4999"),
			body:   `{"message":"Resource not accessible by integration"}`,
			quotas: []backoff.Quota{req(backoff.Quota{Limit: 5000, Remaining: 4999})},
		},
		{
			name:   "Discord, a success: Reset-After wins over Reset",
			status: 200,
			h: header("X-RateLimit-Limit", "5", "X-RateLimit-Remaining", "4", "X-RateLimit-Reset", "1773489601.234",
				"X-RateLimit-Reset-After", "2.5", "X-RateLimit-Bucket", "abcd1234"),
			quotas: []backoff.Quota{req(backoff.Quota{Limit: 5, Remaining: 4, Rate: 1.6, Reset: 2500 * time.Millisecond})},
		},
		{
			name:   "Discord, a 429 whose body says retry_after",
			status: 429,
			h: header("X-RateLimit-Limit", "5", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1773489601.234",
				"X-RateLimit-Reset-After", "1.234", "X-RateLimit-Scope", "user", "Content-Type", "application/json"),
			body:    `{"message": "You are being rate limited.", "retry_after": 0.64, "global": false}`,
			quotas:  []backoff.Quota{req(backoff.Quota{Limit: 5, Exhausted: true, Reset: 1234 * time.Millisecond})},
			refused: true, wait: 640 * time.Millisecond, waitSaid: true,
		},
		{
			name:   "Shopify, a success",
			status: 200,
			h:      header("X-Shopify-Shop-Api-Call-Limit", "39/40"),
			quotas: []backoff.Quota{req(backoff.Quota{Limit: 40, Remaining: 1})},
		},
		{
			name:    "Shopify, a 429 with Retry-After 2.0",
			status:  429,
			h:       header("X-Shopify-Shop-Api-Call-Limit", "40/40", "Retry-After", "2.0"),
			quotas:  []backoff.Quota{req(backoff.Quota{Limit: 40, Exhausted: true})},
			refused: true, wait: 2 * time.Second, waitSaid: true,
		},
		{
			name:    "Retry-After as an HTTP date",
			status:  503,
			h:       header("Retry-After", "Sat, 14 Mar 2026 12:00:30 GMT"),
			refused: true, wait: 30 * time.Second, waitSaid: true,
		},
		{
			name:    "a 503 without a wait is an outage, spent quota or not",
			status:  503,
			h:       header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "9"),
			quotas:  []backoff.Quota{req(backoff.Quota{Exhausted: true, Reset: 9 * time.Second})},
			refused: true,
		},
		{
			name:    "a bare 429",
			status:  429,
			h:       header(),
			body:    "Too Many Requests",
			refused: true,
		},
		{
			name:   "malformed fields are ignored and reported: no rate is guessed",
			status: 429,
			h: header("Retry-After", "soon", "retry-after-ms", "-5",
				"x-ratelimit-limit-tokens", "lots", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "6 minutes",
				"X-Shopify-Shop-Api-Call-Limit", "39 of 40"),
			body:     `{"retry_after": "later"}`,
			quotas:   []backoff.Quota{tok(backoff.Quota{Exhausted: true})},
			refused:  true,
			problems: 6,
		},
		{
			name:     "a malformed remaining is no quota",
			status:   200,
			h:        header("X-RateLimit-Remaining", "many", "X-RateLimit-Reset", "NaN"),
			problems: 2,
		},
	}
	for _, c := range cases {
		a := backoff.ParseAnswer(c.status, c.h, []byte(c.body), now)
		assert.Equal(t, c.status, a.Status, c.name)
		if assert.Equal(t, len(c.quotas), len(a.Quotas), "%s: %+v", c.name, a.Quotas) {
			for i, q := range c.quotas {
				got := a.Quotas[i]
				assert.InDelta(t, q.Rate, got.Rate, 1e-9, "%s: quota %d: rate", c.name, i)
				q.Rate, got.Rate = 0, 0
				assert.Equal(t, q, got, "%s: quota %d", c.name, i)
			}
		}
		assert.Equal(t, c.refused, a.Refused, c.name)
		assert.Equal(t, c.wait, a.Wait, c.name)
		assert.Equal(t, c.waitSaid, a.WaitSaid, c.name)
		assert.Len(t, a.Problems, c.problems, "%s: %v", c.name, a.Problems)
		for _, err := range a.Problems {
			assert.True(t, errors.Is(err, backoff.ErrMalformed), "%s: %v", c.name, err)
		}
	}
}

func TestUpstreamRuleAnswer(t *testing.T) {
	cases := []struct {
		name     string
		a        backoff.Answer
		attempt  int
		d        time.Duration
		cool, ok bool
	}{
		{"a throttling 403 cools like a 429", backoff.Answer{Status: 403, Refused: true, Wait: 42 * time.Second, WaitSaid: true}, 0, 42 * time.Second, true, true},
		{"a throttling 403 without a wait backs off", backoff.Answer{Status: 403, Refused: true}, 2, 4 * time.Second, true, true},
		{"a plain 403 is no refusal", backoff.Answer{Status: 403}, 0, 0, false, false},
		{"429 with a wait", backoff.Answer{Status: 429, Refused: true, Wait: time.Second, WaitSaid: true}, 0, time.Second, true, true},
		{"503 without: no cooldown", backoff.Answer{Status: 503, Refused: true}, 0, time.Second, false, true},
		{"200", backoff.Answer{Status: 200}, 0, 0, false, false},
	}
	for _, c := range cases {
		d, cool, ok := backoff.UpstreamRule{}.Answer(c.a, c.attempt)
		assert.Equal(t, c.d, d, c.name)
		assert.Equal(t, c.cool, cool, c.name)
		assert.Equal(t, c.ok, ok, c.name)
	}
}

func TestAnswerProblemNamesField(t *testing.T) {
	a := backoff.ParseAnswer(429, header("x-ratelimit-reset-tokens", "6x"), nil, now)
	if assert.Len(t, a.Problems, 1) {
		assert.Contains(t, a.Problems[0].Error(), `x-ratelimit-reset-tokens: "6x"`)
	}
}
