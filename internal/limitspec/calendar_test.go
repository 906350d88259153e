package limitspec

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/throttle"
)

func zone(t *testing.T, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// RATE/day, /week and /month are fixed windows of the calendar in zone=
// (UTC by default); written back, they parse to the same policy.
func TestParseCalendar(t *testing.T) {
	la := zone(t, "America/Los_Angeles")
	cases := []struct {
		in   string
		want throttle.FixedWindow
		out  string
	}{
		{"http:request=2000/day,policy=fixed-window,zone=America/Los_Angeles",
			throttle.FixedWindow{Max: 2000, Calendar: "day", Zone: la},
			"http:request=2000/day,policy=fixed-window,zone=America/Los_Angeles"},
		{"x=2000/day", throttle.FixedWindow{Max: 2000, Calendar: "day"}, "x=2000/day,policy=fixed-window"},
		{"x=5/Week, zone=UTC", throttle.FixedWindow{Max: 5, Calendar: "week"}, "x=5/week,policy=fixed-window"},
		{"x=1000000/month,zone=Pacific/Chatham", throttle.FixedWindow{Max: 1000000, Calendar: "month", Zone: zone(t, "Pacific/Chatham")},
			"x=1000000/month,policy=fixed-window,zone=Pacific/Chatham"},
	}
	for i, c := range cases {
		sp, err := Parse(c.in)
		require.NoError(t, err, "case %d", i)
		assert.Equal(t, c.want, sp.Limit, "case %d", i)
		assert.Equal(t, c.out, sp.String(), "case %d", i)
		again, err := Parse(sp.String())
		require.NoError(t, err, "case %d", i)
		assert.Equal(t, sp.Limit, again.Limit, "case %d: round trip", i)
		assert.Equal(t, FixedWindow, PolicyName(sp.Limit), "case %d", i)
	}
}

// A calendar unit stacks with short limits as named limits of one type.
func TestParseCalendarStacked(t *testing.T) {
	specs, err := ParseAll([]string{
		"http:request=3/s,name=second",
		"http:request=100/m,name=minute,policy=fixed-window",
		"http:request=2000/day,name=day,zone=America/Los_Angeles",
	})
	require.NoError(t, err)
	require.Len(t, specs, 1)
	require.Len(t, specs[0].Limits, 3)
	assert.Equal(t, throttle.FixedWindow{Max: 2000, Calendar: "day", Zone: zone(t, "America/Los_Angeles")}, specs[0].Limits[2].Limit)
	again, err := ParseAll(specs[0].Flags())
	require.NoError(t, err)
	assert.Equal(t, flatOf(specs[0]), flatOf(again[0]))
}

func TestParseCalendarErrors(t *testing.T) {
	for in, want := range map[string]string{
		"x=10/week,policy=sliding-log":    `limit "x=10/week,policy=sliding-log": policy sliding-log has no calendar meaning: a quota per week is a fixed window (policy=fixed-window, or leave policy= out)`,
		"x=10/day,policy=token-bucket":    `limit "x=10/day,policy=token-bucket": policy token-bucket has no calendar meaning: a quota per day is a fixed window (policy=fixed-window, or leave policy= out)`,
		"x=10/day,zone=Mars/Olympus_Mons": `limit "x=10/day,zone=Mars/Olympus_Mons": unknown zone "Mars/Olympus_Mons" (want an IANA time zone name, such as America/Los_Angeles or UTC)`,
		"x=10/day,zone=Local":             `limit "x=10/day,zone=Local": zone Local is each host's own: name the zone, such as America/Los_Angeles`,
		"x=10/s,zone=UTC":                 `limit "x=10/s,zone=UTC": zone is for a quota per day, week or month (RATE/day, RATE/week, RATE/month)`,
		"x=10/day,burst=5":                `limit "x=10/day,burst=5": burst does not apply to a quota per day, a fixed window (burst is for policy token-bucket)`,
		"x=1.5/day":                       `limit "x=1.5/day": rate 1.5 is not a whole number: a quota per day is the most per day`,
		"x=10/year":                       `limit "x=10/year": unknown unit "year" (want s, m, h, day, week or month)`,
		"x=10/s,global=10/day":            `limit "x=10/s,global=10/day": global: unknown unit "day" (want s, m or h)`,
	} {
		_, err := Parse(in)
		require.Error(t, err, in)
		assert.True(t, errors.Is(err, ErrInvalid), in)
		assert.Equal(t, want, err.Error(), in)
	}
}

func TestLoadFileCalendar(t *testing.T) {
	path := writeFile(t, `{"limits": [
		{"type": "http:request", "limits": [
			{"name": "second", "rate": "3/s"},
			{"name": "day", "rate": "2000/day", "zone": "America/Los_Angeles"}
		]},
		{"type": "bad", "rate": "5/month", "policy": "sliding-window"}
	]}`)
	_, err := LoadFile(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "policy sliding-window has no calendar meaning")

	path = writeFile(t, `{"limits": [{"type": "http:request", "limits": [
		{"name": "second", "rate": "3/s"},
		{"name": "day", "rate": "2000/day", "zone": "America/Los_Angeles"}
	]}]}`)
	got, err := LoadFile(path)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, throttle.FixedWindow{Max: 2000, Calendar: "day", Zone: zone(t, "America/Los_Angeles")}, got[0].Limits[1].Limit)
}

// A calendar quota among every other option of a type: a key per tenant, a
// fair, adaptive global bucket, weights, max-wait, in-flight; written back,
// it parses to the same Spec.
func TestParseCalendarWithEveryOption(t *testing.T) {
	specs := []string{
		"http:request=3/s,name=second,key=tenant:{header.sluice-key},global=50/s:5,fair=on,adapt=on,weights=tenant:acme:3,max-wait=2s,in-flight=4",
		"http:request=2000/day,name=day,zone=America/Los_Angeles",
	}
	all, err := ParseAll(specs)
	require.NoError(t, err)
	require.Len(t, all, 1)
	sp := all[0]
	assert.True(t, sp.Fair)
	assert.True(t, sp.Adapt)
	assert.Equal(t, "tenant:{header.sluice-key}", sp.KeyTemplate)
	assert.Equal(t, throttle.FixedWindow{Max: 2000, Calendar: "day", Zone: zone(t, "America/Los_Angeles")}, sp.Limits[1].Limit)
	again, err := ParseAll(sp.Flags())
	require.NoError(t, err)
	assert.Equal(t, flatOf(sp), flatOf(again[0]), "round trip through %q", sp.Flags())
}
