package backoff

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Quota is what an upstream announced about its rate limit in the headers
// of an answer.
type Quota struct {
	// Rate is the announced sustainable rate, per second: the IETF
	// RateLimit-Policy's quota over its window; for X-RateLimit-* fields,
	// which name no window, what remains spread over the time to the reset
	// when that is at least two seconds (a reset of one, rounded up, could
	// be a millisecond). 0 if none could be read.
	Rate float64
	// Exhausted: the announced remaining quota is 0; Reset is when it is
	// whole again (0 if not said).
	Exhausted bool
	Reset     time.Duration
}

// minRateReset is the least X-RateLimit-Reset, in seconds, from which the
// remaining quota over it is read as a rate.
const minRateReset = 2

// epochCutoff tells a Unix time from delta seconds in X-RateLimit-Reset: no
// upstream announces a reset a billion seconds (31 years) away.
const epochCutoff = 1_000_000_000

// ParseQuota reads the rate-limit fields of an answer: the IETF ones
// (draft-ietf-httpapi-ratelimit-headers, `RateLimit-Policy: "p";q=100;w=60`
// and `RateLimit: "p";r=0;t=12`, the first policy of each list), else the
// X-RateLimit-Limit / -Remaining / -Reset convention, whose Reset may be delta
// seconds or a Unix time (a value over a billion is taken as a Unix time and
// read against now). ok is false when the answer says nothing usable.
func ParseQuota(h http.Header, now time.Time) (q Quota, ok bool) {
	if pol := h.Get("RateLimit-Policy"); pol != "" {
		if qv, w, found := sfParams(pol, "q", "w"); found && qv > 0 && w > 0 {
			q.Rate, ok = qv/w, true
		}
		if r, t, found := sfParams(h.Get("RateLimit"), "r", "t"); found {
			q.Exhausted, q.Reset, ok = r <= 0, seconds(t), true
		}
		return q, ok
	}
	remaining, errR := strconv.ParseFloat(strings.TrimSpace(h.Get("X-RateLimit-Remaining")), 64)
	reset, errT := strconv.ParseFloat(strings.TrimSpace(h.Get("X-RateLimit-Reset")), 64)
	if errR != nil || math.IsNaN(remaining) || remaining < 0 {
		return Quota{}, false
	}
	if errT == nil && reset > epochCutoff {
		reset = float64(time.Unix(int64(reset), 0).Sub(now)) / float64(time.Second)
	}
	if errT != nil || math.IsNaN(reset) || reset < 0 {
		reset = 0
	}
	q.Exhausted, q.Reset, ok = remaining == 0, seconds(reset), true
	// A reset in whole seconds is rounded up: one of a second may be a
	// millisecond, and what remains over it says nothing of the rate.
	if remaining > 0 && reset >= minRateReset {
		q.Rate = remaining / reset
	}
	return q, ok
}

// sfParams reads two numeric parameters a and b of the first member of a
// Structured Field List such as `"default";q=100;w=60, "other";q=5;w=1`.
func sfParams(field, a, b string) (va, vb float64, ok bool) {
	first, _, _ := strings.Cut(field, ",")
	var gotA, gotB bool
	for _, p := range strings.Split(first, ";")[1:] {
		name, value, found := strings.Cut(strings.TrimSpace(p), "=")
		if !found {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		switch name {
		case a:
			va, gotA = v, true
		case b:
			vb, gotB = v, true
		}
	}
	return va, vb, gotA && gotB
}

func seconds(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	return time.Duration(math.Min(s, float64(MaxRetryAfter/time.Second)) * float64(time.Second))
}
