package calendar

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func load(t *testing.T, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// Each case: the window of t, and the lengths of it and the next.
func TestBounds(t *testing.T) {
	ny := load(t, "America/New_York")
	ktm := load(t, "Asia/Kathmandu")
	cht := load(t, "Pacific/Chatham")
	sant := load(t, "America/Santiago") // moves its clocks at 24:00
	cases := []struct {
		name      string
		u         Unit
		loc       *time.Location
		t         time.Time
		start     string // RFC 3339, in loc
		len, next time.Duration
	}{
		{"a 23-hour day", Day, ny, time.Date(2026, 3, 8, 12, 0, 0, 0, ny), "2026-03-08T00:00:00-05:00", 23 * time.Hour, 24 * time.Hour},
		{"a 25-hour day", Day, ny, time.Date(2026, 11, 1, 12, 0, 0, 0, ny), "2026-11-01T00:00:00-04:00", 25 * time.Hour, 24 * time.Hour},
		{"the day before a 23-hour day", Day, ny, time.Date(2026, 3, 7, 23, 59, 59, 0, ny), "2026-03-07T00:00:00-05:00", 24 * time.Hour, 23 * time.Hour},
		{"Kathmandu, +05:45", Day, ktm, time.Date(2026, 5, 1, 18, 14, 0, 0, time.UTC), "2026-05-01T00:00:00+05:45", 24 * time.Hour, 24 * time.Hour},
		{"Kathmandu, a minute later", Day, ktm, time.Date(2026, 5, 1, 18, 15, 0, 0, time.UTC), "2026-05-02T00:00:00+05:45", 24 * time.Hour, 24 * time.Hour},
		{"Chatham, +12:45 to +13:45 in April: a 25-hour day", Day, cht, time.Date(2026, 4, 5, 1, 0, 0, 0, cht), "2026-04-05T00:00:00+13:45", 25 * time.Hour, 24 * time.Hour},
		{"Chatham week across the change", Week, cht, time.Date(2026, 4, 1, 0, 0, 0, 0, cht), "2026-03-30T00:00:00+13:45", 7*24*time.Hour + time.Hour, 7 * 24 * time.Hour},
		{"Santiago: the day whose midnight does not exist", Day, sant, time.Date(2026, 9, 6, 12, 0, 0, 0, sant), "2026-09-06T01:00:00-03:00", 23 * time.Hour, 24 * time.Hour},
		{"February 2027: 28 days", Month, time.UTC, time.Date(2027, 2, 14, 0, 0, 0, 0, time.UTC), "2027-02-01T00:00:00Z", 28 * 24 * time.Hour, 31 * 24 * time.Hour},
		{"February 2028: 29 days", Month, time.UTC, time.Date(2028, 2, 29, 23, 0, 0, 0, time.UTC), "2028-02-01T00:00:00Z", 29 * 24 * time.Hour, 31 * 24 * time.Hour},
		{"April: 30 days", Month, time.UTC, time.Date(2026, 4, 30, 0, 0, 0, 0, time.UTC), "2026-04-01T00:00:00Z", 30 * 24 * time.Hour, 31 * 24 * time.Hour},
		{"December: 31 days, into January", Month, time.UTC, time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC), "2026-12-01T00:00:00Z", 31 * 24 * time.Hour, 31 * 24 * time.Hour},
		{"a New York month with the fall change", Month, ny, time.Date(2026, 11, 15, 0, 0, 0, 0, ny), "2026-11-01T00:00:00-04:00", 30*24*time.Hour + time.Hour, 31 * 24 * time.Hour},
		{"ISO week: Thursday 31 December", Week, time.UTC, time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC), "2026-12-28T00:00:00Z", 7 * 24 * time.Hour, 7 * 24 * time.Hour},
		{"ISO week: Sunday's last second", Week, time.UTC, time.Date(2027, 1, 3, 23, 59, 59, 0, time.UTC), "2026-12-28T00:00:00Z", 7 * 24 * time.Hour, 7 * 24 * time.Hour},
		{"ISO week: Monday 00:00", Week, time.UTC, time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC), "2027-01-04T00:00:00Z", 7 * 24 * time.Hour, 7 * 24 * time.Hour},
		{"a New York week with the spring change", Week, ny, time.Date(2026, 3, 8, 12, 0, 0, 0, ny), "2026-03-02T00:00:00-05:00", 7*24*time.Hour - time.Hour, 7 * 24 * time.Hour},
	}
	for i, c := range cases {
		b := Bounds(c.u, c.t, c.loc)
		want, err := time.Parse(time.RFC3339, c.start)
		require.NoError(t, err)
		assert.Equal(t, want.UTC(), b[0].UTC(), "case %d %s: start", i, c.name)
		assert.Equal(t, c.len, b[1].Sub(b[0]), "case %d %s: length", i, c.name)
		assert.Equal(t, c.next, b[2].Sub(b[1]), "case %d %s: next length", i, c.name)
		assert.False(t, c.t.Before(b[0]), "case %d %s: t in the window", i, c.name)
		assert.True(t, c.t.Before(b[1]), "case %d %s: t in the window", i, c.name)
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]Unit{"day": Day, "days": Day, "weeks": Week, "month": Month, "months": Month} {
		u, err := Parse(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, u, in)
	}
	for _, bad := range []string{"year", "d", "mo", ""} {
		_, err := Parse(bad)
		assert.Error(t, err, bad)
	}
}
