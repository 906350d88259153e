package httplimit

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// The header fields a Middleware sets on every response it limits.
//
// RateLimit and RateLimit-Policy follow draft-ietf-httpapi-ratelimit-headers-11
// (May 2026; the syntax is unchanged since -08): each is a Structured Field
// List (RFC 9651) of one Item, a String naming the policy, with Integer
// parameters:
//
//	RateLimit-Policy: "default";q=100;w=60   quota q units per window w seconds
//	RateLimit: "default";r=42;t=12           r units available; t seconds, see below
//
// Nested Middlewares (a per-client policy inside a global one) each add their
// member to both lists, as the draft allows (a list may be split over several
// fields). The X-RateLimit-* fields are the older, unstandardised convention
// many clients read, and can state one policy only: X-RateLimit-Limit is q,
// X-RateLimit-Remaining is r, and X-RateLimit-Reset is t, as delta-seconds (a
// number of seconds from now), not a Unix time; with Middlewares nested, the
// innermost one's values win.
//
// t is whole seconds, rounded up. On an allowed response it is the time until
// the quota is whole again (throttle.Result.ResetAfter), the reading most
// clients give it. On a denied one it is the time until the request could be
// granted, the same instant as Retry-After, as the draft asks (§6: Retry-After
// should not point before the end of the effective window).
const (
	headerLimit       = "X-RateLimit-Limit"
	headerRemaining   = "X-RateLimit-Remaining"
	headerReset       = "X-RateLimit-Reset"
	headerRateLimit   = "RateLimit"
	headerPolicy      = "RateLimit-Policy"
	headerRetryAfter  = "Retry-After"
	unavailableRetry  = 5 * time.Second // Retry-After of a 503 when the store is down
	maxPolicyNameSize = 64              // bytes of a policy name, before quoting
)

// fields holds what a Middleware's headers say that does not change per request.
type fields struct {
	limit  string // X-RateLimit-Limit: q
	policy string // RateLimit-Policy
	item   string // the quoted policy name, that RateLimit's item starts with
}

func newFields(name string, quota int, window time.Duration) fields {
	item := sfString(name)
	policy := item + ";q=" + strconv.Itoa(quota)
	if w := seconds(window); w > 0 { // w must be positive; a zero window is left out
		policy += ";w=" + strconv.FormatInt(w, 10)
	}
	return fields{limit: strconv.Itoa(quota), policy: policy, item: item}
}

// set writes the rate-limit fields for res to h, and Retry-After when res
// was denied.
func (f *fields) set(h http.Header, quota int, res throttle.Result) {
	r := min(max(res.Remaining, 0), quota)
	t := seconds(res.ResetAfter)
	if !res.Allowed {
		t = max(seconds(res.RetryAfter), 1) // never 0: the request was refused
		h.Set(headerRetryAfter, strconv.FormatInt(t, 10))
	}
	rs, ts := strconv.Itoa(r), strconv.FormatInt(t, 10)
	h.Set(headerLimit, f.limit)
	h.Set(headerRemaining, rs)
	h.Set(headerReset, ts)
	// Added, not set: nested Middlewares each state their policy, one list member each.
	h.Add(headerPolicy, f.policy)
	h.Add(headerRateLimit, f.item+";r="+rs+";t="+ts)
}

// seconds is d in whole seconds, rounded up; 0 for d ≤ 0.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// checkName reports why name cannot be a policy name: it must be a non-empty
// Structured Field String (printable ASCII), must not carry a Redis Cluster
// hash tag into bucket names, and must not hold ':', which ends it in a
// bucket name ("<name>:<key>"), so that no key reaches another name's bucket.
func checkName(name string) error {
	if name == "" || len(name) > maxPolicyNameSize {
		return invalidf("policy name %q must be 1 to %d bytes", name, maxPolicyNameSize)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e || c == '{' || c == '}' || c == ':' {
			return invalidf("policy name %q must be printable ASCII without '{', '}' or ':'", name)
		}
	}
	return nil
}

// sfString is s, printable ASCII, as a Structured Field String (RFC 9651 §3.3.3).
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}
