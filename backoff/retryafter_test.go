package backoff_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/backoff"
)

// now is a Saturday; the dates below are written relative to it.
var now = time.Date(2026, time.March, 14, 12, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	cases := []struct {
		value string
		want  time.Duration
	}{
		// delta-seconds
		{"0", 0},
		{"120", 120 * time.Second},
		{" 5 ", 5 * time.Second},
		{"\t7\t", 7 * time.Second},
		{"00120", 120 * time.Second},
		{"86400", backoff.MaxRetryAfter},
		{"86401", backoff.MaxRetryAfter},
		{"9223372036854775807", backoff.MaxRetryAfter},
		{"99999999999999999999999", backoff.MaxRetryAfter},

		// decimal seconds (Shopify, Discord)
		{"2.0", 2 * time.Second},
		{"1.5", 1500 * time.Millisecond},
		{" 0.64 ", 640 * time.Millisecond},
		{"0.0000000019", 1},
		{"86399.9999999999", backoff.MaxRetryAfter - 1},
		{"86400.5", backoff.MaxRetryAfter},
		{"99999999999999999999999.5", backoff.MaxRetryAfter},

		// IMF-fixdate
		{"Sat, 14 Mar 2026 12:02:00 GMT", 2 * time.Minute},
		{" Sat, 14 Mar 2026 12:00:30 GMT ", 30 * time.Second},
		{"Sat, 14 Mar 2026 12:00:00 GMT", 0},
		{"Sat, 14 Mar 2026 11:59:59 GMT", 0},
		{"Thu, 01 Jan 1970 00:00:00 GMT", 0},
		{"Sun, 15 Mar 2026 11:00:00 GMT", 23 * time.Hour},
		{"Sun, 15 Mar 2026 13:00:00 GMT", backoff.MaxRetryAfter},
		{"Fri, 14 Mar 2036 12:00:00 GMT", backoff.MaxRetryAfter},
		{"SAT, 14 mar 2026 12:02:00 GMT", 2 * time.Minute}, // names: any case
		{"Mon, 14 Mar 2026 12:02:00 GMT", 2 * time.Minute}, // weekday not checked

		// obsolete RFC 850
		{"Saturday, 14-Mar-26 12:02:00 GMT", 2 * time.Minute},
		{"Friday, 13-Mar-26 12:00:00 GMT", 0},
		{"Friday, 14-Mar-36 12:00:00 GMT", backoff.MaxRetryAfter},

		// asctime
		{"Sat Mar 14 12:02:00 2026", 2 * time.Minute},
		{"Sun Mar  1 12:00:00 2026", 0},
		{"Fri Mar 14 12:00:00 2036", backoff.MaxRetryAfter},
	}
	for i, tc := range cases {
		got, err := backoff.ParseRetryAfter(tc.value, now)
		require.NoError(t, err, "case %d: %q", i, tc.value)
		assert.Equal(t, tc.want, got, "case %d: %q", i, tc.value)
	}
}

func TestParseRetryAfterSubSecondNow(t *testing.T) {
	got, err := backoff.ParseRetryAfter("Sat, 14 Mar 2026 12:02:00 GMT", now.Add(500*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, 119500*time.Millisecond, got)
}

func TestParseRetryAfterInvalid(t *testing.T) {
	cases := []string{
		"",
		"   ",
		"-1",
		"-1.5",
		".5",
		"5.",
		"1.2.3",
		"1,5",
		"+5",
		"abc",
		"1e3",
		"0x10",
		"12 34",
		"5s",
		"120\n",
		"١٢٠", // Arabic-Indic digits
		"Sat, 14 Mar 2026 12:02:00 PST",
		"Sat, 14 Mar 2026 12:02:00 UTC",
		"Sat, 14 Mar 2026 12:02:00",
		"Sat, 14 Mar 2026 25:02:00 GMT",
		"Sat, 32 Mar 2026 12:00:00 GMT",
		"Sat, 29 Feb 2026 12:00:00 GMT",
		"sat, 14 mar 2026 12:02:00 gmt",
		"Sat, 14 Mar 2026 12:02:00 GMT later",
		"2026-03-14T12:02:00Z",
		"Saturday, 14-Mar-2026 12:02:00 GMT",
		"Saturday, 14-Mar-26 12:02:00 EST",
		"Sat Mar 14 12:02:00",
	}
	for i, value := range cases {
		got, err := backoff.ParseRetryAfter(value, now)
		assert.True(t, errors.Is(err, backoff.ErrInvalidRetryAfter), "case %d: %q: err = %v", i, value, err)
		assert.Equal(t, time.Duration(0), got, "case %d: %q", i, value)
	}
}

func TestParseRetryAfterErrorQuotesValue(t *testing.T) {
	_, err := backoff.ParseRetryAfter("soon", now)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"soon"`)

	_, err = backoff.ParseRetryAfter(strings.Repeat("x", 10_000), now)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"`+strings.Repeat("x", 64)+`"...`)
	assert.Less(t, len(err.Error()), 200)
}

func TestRetryAfterFromHeader(t *testing.T) {
	cases := []struct {
		name    string
		header  http.Header
		want    time.Duration
		wantOK  bool
		wantErr bool
	}{
		{"nil header", nil, 0, false, false},
		{"absent", http.Header{"Content-Type": {"text/plain"}}, 0, false, false},
		{"seconds", http.Header{"Retry-After": {"30"}}, 30 * time.Second, true, false},
		{"date", http.Header{"Retry-After": {"Sat, 14 Mar 2026 12:01:00 GMT"}}, time.Minute, true, false},
		{"first of two", http.Header{"Retry-After": {"10", "20"}}, 10 * time.Second, true, false},
		{"empty", http.Header{"Retry-After": {""}}, 0, true, true},
		{"malformed", http.Header{"Retry-After": {"later"}}, 0, true, true},
	}
	for _, tc := range cases {
		got, ok, err := backoff.RetryAfterFromHeader(tc.header, now)
		assert.Equal(t, tc.wantOK, ok, "case %s", tc.name)
		assert.Equal(t, tc.want, got, "case %s", tc.name)
		if tc.wantErr {
			assert.True(t, errors.Is(err, backoff.ErrInvalidRetryAfter), "case %s: err = %v", tc.name, err)
		} else {
			assert.NoError(t, err, "case %s", tc.name)
		}
	}

	h := http.Header{}
	h.Set("retry-after", "5") // canonicalised by Set
	got, ok, err := backoff.RetryAfterFromHeader(h, now)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 5*time.Second, got)
}
