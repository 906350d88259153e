package backoff

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidRetryAfter is wrapped by the errors ParseRetryAfter and
// RetryAfterFromHeader return for a malformed Retry-After value.
var ErrInvalidRetryAfter = errors.New("backoff: invalid Retry-After")

// MaxRetryAfter is the longest delay ParseRetryAfter returns. Longer values,
// which are more likely a server bug than a real request, are clamped to it.
const MaxRetryAfter = 24 * time.Hour

// httpDateLayouts are the three HTTP-date forms of RFC 9110 §5.6.7, the same
// three net/http accepts. Unlike http.ParseTime, every form must say GMT, as
// the RFC requires: http.ParseTime's RFC 850 layout accepts any zone
// abbreviation and reads it through time.Local, so its answer would depend on
// the host's time zone.
var httpDateLayouts = [...]string{
	http.TimeFormat,                  // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
	"Monday, 02-Jan-06 15:04:05 GMT", // obsolete RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
	time.ANSIC,                       // asctime: Sun Nov  6 08:49:37 1994 (GMT implied)
}

// maxQuoted bounds how much of a bad value goes into an error message.
const maxQuoted = 64

// ParseRetryAfter parses a Retry-After field value (RFC 9110 §10.2.3) and
// returns how long the server asked the client to wait.
//
// The value is either delta-seconds, a non-negative decimal integer such as
// "120" (or a decimal fraction such as "2.0" or "0.64", as Shopify and
// Discord send; digits beyond the nanosecond are dropped), or an HTTP-date in any of its three forms: IMF-fixdate
// ("Sun, 06 Nov 1994 08:49:37 GMT"), obsolete RFC 850
// ("Sunday, 06-Nov-94 08:49:37 GMT") or asctime ("Sun Nov  6 08:49:37 1994").
// Dates must end in GMT (asctime has no zone and is read as GMT); as with
// time.Parse, day and month names are not checked for case, nor the weekday
// against the date. Two-digit RFC 850 years follow time.Parse (69–99 are
// 19xx, 00–68 are 20xx). A date is measured from now, the instant the
// response was received; a date at or before now gives 0.
//
// Spaces and tabs around the value are ignored. Results above MaxRetryAfter,
// including digit strings too long for an int64, are clamped to
// MaxRetryAfter, so the result is always in [0, MaxRetryAfter].
//
// An empty, negative or signed ("+5") number, a fraction without digits on
// both sides of its point (".5", "5."), or anything that is
// neither a number nor a date, is an error wrapping ErrInvalidRetryAfter that
// quotes the value (cut to 64 bytes).
func ParseRetryAfter(value string, now time.Time) (time.Duration, error) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return 0, fmt.Errorf("%w: empty value", ErrInvalidRetryAfter)
	}
	if isDigits(v) {
		return parseDeltaSeconds(v), nil
	}
	if whole, frac, ok := strings.Cut(v, "."); ok && isDigits(whole) && isDigits(frac) {
		return parseDecimalSeconds(whole, frac), nil
	}
	for _, layout := range httpDateLayouts {
		t, err := time.Parse(layout, v)
		if err != nil {
			continue
		}
		// Sub saturates rather than overflowing, however far apart the
		// two instants are.
		return min(max(t.Sub(now), 0), MaxRetryAfter), nil
	}
	return 0, fmt.Errorf("%w: %s is neither delta-seconds nor an HTTP-date", ErrInvalidRetryAfter, quote(v))
}

// RetryAfterFromHeader parses the Retry-After field of h with ParseRetryAfter.
// ok reports whether the field is present; when it is present but malformed,
// ok is true and err wraps ErrInvalidRetryAfter. Retry-After is a single
// value, so if the field appears more than once only the first is used.
func RetryAfterFromHeader(h http.Header, now time.Time) (d time.Duration, ok bool, err error) {
	values := h.Values("Retry-After")
	if len(values) == 0 {
		return 0, false, nil
	}
	d, err = ParseRetryAfter(values[0], now)
	return d, true, err
}

// parseDeltaSeconds converts a non-empty string of ASCII digits, clamping to
// MaxRetryAfter.
func parseDeltaSeconds(digits string) time.Duration {
	const maxSeconds = int64(MaxRetryAfter / time.Second)
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > maxSeconds {
		// Only digits reach here, so an error means out of range.
		return MaxRetryAfter
	}
	return time.Duration(n) * time.Second
}

// parseDecimalSeconds converts whole.frac seconds, both non-empty strings of
// ASCII digits, clamping to MaxRetryAfter; frac counts to the nanosecond.
func parseDecimalSeconds(whole, frac string) time.Duration {
	d := parseDeltaSeconds(whole)
	if d >= MaxRetryAfter {
		return MaxRetryAfter
	}
	frac = (frac + "000000000")[:9]
	ns, _ := strconv.ParseInt(frac, 10, 64) // nine digits: always fits
	return min(d+time.Duration(ns), MaxRetryAfter)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// quote returns s in Go quotes, cut to maxQuoted bytes.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:maxQuoted]) + "..."
}
