package integration

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// quotaNow is the state of an upstream's enforced bucket as an answer tells it.
type quotaNow struct {
	now         time.Time
	burst, left int
	ahead       time.Duration // until the bucket is whole again
}

// dialect is how an API of one kind writes its quota on an answer, and how
// it refuses a request that would pass its limit, wait before it may come.
type dialect struct {
	quota  func(h http.Header, q quotaNow)
	refuse func(h http.Header, q quotaNow, wait time.Duration) (status int, body string)
}

// dialects are the APIs whose answers the fake upstream can speak like, as
// their documentation shows them (docs/third-party.md).
var dialects = map[string]dialect{
	"openai": {
		quota: func(h http.Header, q quotaNow) {
			h.Set("x-ratelimit-limit-requests", strconv.Itoa(q.burst))
			h.Set("x-ratelimit-remaining-requests", strconv.Itoa(q.left))
			h.Set("x-ratelimit-reset-requests", q.ahead.Round(time.Millisecond).String())
		},
		refuse: func(h http.Header, q quotaNow, wait time.Duration) (int, string) {
			h.Set("retry-after-ms", strconv.FormatInt(ceilDiv(wait, time.Millisecond), 10))
			h.Set("retry-after", strconv.FormatInt(ceilDiv(wait, time.Second), 10))
			return http.StatusTooManyRequests, `{"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}}`
		},
	},
	"anthropic": {
		quota: func(h http.Header, q quotaNow) {
			h.Set("anthropic-ratelimit-requests-limit", strconv.Itoa(q.burst))
			h.Set("anthropic-ratelimit-requests-remaining", strconv.Itoa(q.left))
			h.Set("anthropic-ratelimit-requests-reset", q.now.Add(q.ahead).UTC().Format(time.RFC3339))
		},
		refuse: func(h http.Header, q quotaNow, wait time.Duration) (int, string) {
			h.Set("retry-after", strconv.FormatInt(ceilDiv(wait, time.Second), 10))
			return http.StatusTooManyRequests, `{"type": "error", "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"}}`
		},
	},
	"github": {
		quota: func(h http.Header, q quotaNow) {
			h.Set("x-ratelimit-limit", strconv.Itoa(q.burst))
			h.Set("x-ratelimit-remaining", strconv.Itoa(q.left))
			h.Set("x-ratelimit-used", strconv.Itoa(q.burst-q.left))
			h.Set("x-ratelimit-reset", unixCeil(q.now.Add(q.ahead)))
			h.Set("x-ratelimit-resource", "core")
		},
		refuse: func(h http.Header, q quotaNow, wait time.Duration) (int, string) {
			h.Set("x-ratelimit-remaining", "0")
			h.Set("x-ratelimit-used", strconv.Itoa(q.burst))
			h.Set("x-ratelimit-reset", unixCeil(q.now.Add(wait)))
			return http.StatusForbidden, `{"message": "API rate limit exceeded for user ID 1.", "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api", "status": "403"}`
		},
	},
	"discord": {
		quota: func(h http.Header, q quotaNow) {
			h.Set("X-RateLimit-Limit", strconv.Itoa(q.burst))
			h.Set("X-RateLimit-Remaining", strconv.Itoa(q.left))
			reset := q.now.Add(q.ahead)
			h.Set("X-RateLimit-Reset", fmt.Sprintf("%d.%03d", reset.Unix(), reset.Nanosecond()/1e6))
			h.Set("X-RateLimit-Reset-After", fmt.Sprintf("%.3f", math.Ceil(q.ahead.Seconds()*1000)/1000))
			h.Set("X-RateLimit-Bucket", "abcd1234")
		},
		refuse: func(h http.Header, q quotaNow, wait time.Duration) (int, string) {
			h.Set("X-RateLimit-Remaining", "0")
			h.Set("Content-Type", "application/json")
			return http.StatusTooManyRequests, fmt.Sprintf(`{"message": "You are being rate limited.", "retry_after": %.3f, "global": false}`,
				math.Ceil(wait.Seconds()*1000)/1000)
		},
	},
	"shopify": {
		quota: func(h http.Header, q quotaNow) {
			h.Set("X-Shopify-Shop-Api-Call-Limit", fmt.Sprintf("%d/%d", q.burst-q.left, q.burst))
		},
		refuse: func(h http.Header, q quotaNow, wait time.Duration) (int, string) {
			h.Set("X-Shopify-Shop-Api-Call-Limit", fmt.Sprintf("%d/%d", q.burst, q.burst))
			h.Set("Retry-After", fmt.Sprintf("%.1f", math.Ceil(wait.Seconds()*10)/10))
			return http.StatusTooManyRequests, `{"errors": "Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service."}`
		},
	},
}

// speak answers a request that arrived at now, which the enforced bucket
// answered status (429 and its wait for a refusal), in dialect d.
func (u *upstream) speak(w http.ResponseWriter, d dialect, now time.Time, status int, retryAfter string, wait time.Duration) {
	u.mu.Lock()
	interval := time.Duration(float64(time.Second) / u.rateAt(now))
	ahead := max(u.tat.Sub(now), 0)
	u.mu.Unlock()
	q := quotaNow{now: now, burst: u.cfg.Burst, left: max(u.cfg.Burst-int(ahead/interval)-1, 0), ahead: ahead}
	body := http.StatusText(status)
	if status == http.StatusTooManyRequests {
		if wait <= 0 { // a refusal window's: its Retry-After as given
			w.Header().Set("Retry-After", retryAfter)
		} else {
			status, body = d.refuse(w.Header(), q, wait)
		}
	} else {
		d.quota(w.Header(), q)
	}
	w.WriteHeader(status)
	fmt.Fprintln(w, body)
}

func ceilDiv(d, unit time.Duration) int64 { return int64((d + unit - 1) / unit) }

func unixCeil(t time.Time) string {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return strconv.FormatInt(s, 10)
}

// TestAdaptiveAnnouncedDialects runs built workers configured at four times
// an upstream's limits (200/s burst 20 before 50/s burst 5: the issue's
// fleet bar) against the upstream speaking each API's dialect: its quota on
// every answer, its refusals its own way (GitHub's 403 with its quota spent,
// Discord's wait in a JSON body, Shopify's decimal Retry-After, OpenAI's
// retry-after-ms). Every job is done, none archived: a GitHub 403 is a
// throttle, not a client error. IETF fields are TestAdaptiveColdStart's.
//
// In CI it runs 100 jobs per dialect, bounded loosely for a shared
// machine; the bar (300 jobs within 1.2x the ideal, at most 1 %
// of answers refused) is SLUICE_DIALECT_FULL=1 go test -count=1 -run
// TestAdaptiveAnnouncedDialects -v ./integration/ (docs/benchmarks.md).
func TestAdaptiveAnnouncedDialects(t *testing.T) {
	// Measured at 100 jobs: 1.01-1.07x, none refused, at a load average
	// of 6-8 (before the capacity rule and the spent-quota wait: GitHub
	// 1.81x, 3.8 % refused); the bounds leave room for a loaded CI host.
	jobs, makespan, refusedMost := 100, 2.0, 0.03
	if os.Getenv("SLUICE_DIALECT_FULL") != "" {
		jobs, makespan, refusedMost = 300, 1.2, 0.01
	}
	for _, name := range []string{"openai", "anthropic", "github", "discord", "shopify"} {
		t.Run(name, func(t *testing.T) {
			r := runAdaptive(t, upstreamConfig{Rate: 50, Burst: 5, Announce: name}, "http:request=200/s,burst=20", jobs)
			ideal := idealMakespan(jobs, 50, 5)
			refused := len(r.rs) - r.status[http.StatusOK]
			t.Logf("%s: %d jobs, ideal %.2fs (%.2fx); %d refused of %d", name, jobs, ideal.Seconds(), r.makespan.Seconds()/ideal.Seconds(), refused, len(r.rs))
			assert.Equal(t, jobs, r.status[http.StatusOK], "every job done")
			assert.Equal(t, 0, r.qi.Archived, "archived")
			assert.Equal(t, int64(0), r.stats.Archived)
			assert.Less(t, r.makespan.Seconds(), makespan*ideal.Seconds(), "makespan")
			assert.LessOrEqual(t, float64(refused), refusedMost*float64(len(r.rs)), "refused answers")
		})
	}
}
