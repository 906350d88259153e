package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/browsertest"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

func TestQuotaText(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err)
	now := time.Date(2026, 11, 27, 18, 48, 0, 0, la)
	left := 766
	v := quotaOf(throttle.FixedWindow{Max: 2000, Calendar: "day", Zone: la}, &left, now)
	assert.Equal(t, "1,234 of 2,000 today; resets 00:00 America/Los_Angeles, in 5h12m", v.Text)
	assert.Equal(t, "2026-11-28T00:00:00-08:00", v.Reset)
	assert.Equal(t, 1234, *v.Used)
	v = quotaOf(throttle.FixedWindow{Max: 1000000, Calendar: "month"}, nil, time.Date(2026, 2, 27, 0, 0, 0, 0, time.UTC))
	assert.Equal(t, "1,000,000 per key this month; resets Sun 1 Mar 00:00 UTC, in 2d0h", v.Text)
	assert.Nil(t, v.Used)
	assert.Equal(t, "999", thousands(999))
	assert.Equal(t, "-1,000", thousands(-1000))
}

// sluice limits, table and JSON: a calendar quota's used and reset, and the
// jobs parked until it.
func TestLimitsShowQuota(t *testing.T) {
	srv := redistest.Start(t)
	r := runArgs("set", "q=3/s,name=second", "q=2000/day,name=day,zone=America/Los_Angeles", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	rdb := srv.Client(t)
	lim := throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix("sluice:"))
	la, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err)
	day := throttle.FixedWindow{Max: 2000, Calendar: "day", Zone: la}
	res, err := lim.TryAcquire(context.Background(), "{q}{day}:q", day, 1234)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	midnight := time.Now().In(la).Add(24 * time.Hour)
	midnight = time.Date(midnight.Year(), midnight.Month(), midnight.Day(), 0, 0, 0, 0, la)
	for _, id := range []string{"a~1", "b~1"} {
		require.NoError(t, rdb.ZAdd(context.Background(), "sluice:parked:{q}", redis.Z{Score: float64(midnight.UnixMilli()), Member: id}).Err())
	}

	r = runArgs("limits", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Regexp(t, `q \(day\): 1,234 of 2,000 today; resets 00:00 America/Los_Angeles, in \d+h\d\dm; 2 parked until 00:00 America/Los_Angeles`, r.stdout)
	assert.Regexp(t, `q \(day\)\s+fixed-window\s+q=2000/day,policy=fixed-window,zone=America/Los_Angeles,name=day\s`, r.stdout)

	r = runArgs("limits", "--redis", srv.URL(), "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var views []limitView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
	require.Len(t, views, 2)
	q := views[1].Quota
	require.NotNil(t, q)
	assert.Equal(t, "day", q.Unit)
	assert.Equal(t, "America/Los_Angeles", q.Zone)
	assert.Equal(t, 2000, q.Max)
	assert.Equal(t, 1234, *q.Used)
	assert.Equal(t, midnight.Format(time.RFC3339), q.Reset)
	assert.InDelta(t, time.Until(midnight).Seconds(), q.ResetInS, 5)
	assert.Equal(t, 2, views[1].Parked)
	assert.Equal(t, midnight.Format(time.RFC3339), views[1].ParkedUntil)
	assert.Nil(t, views[0].Quota, "the 3/s limit has none")

	r = runArgs("inspect", "q", "--limit", "day", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Regexp(t, `q: 766 left, .*\nq: 1,234 of 2,000 today; resets 00:00 America/Los_Angeles, in \d+h\d\dm\n`, r.stdout)
}

// The dashboard, in a real browser, shows a calendar quota's line in its
// type's section, with the jobs parked until its reset.
func TestDashboardShowsQuota(t *testing.T) {
	chrome := browsertest.Path(t)
	hs, f := newDashboard(t, "")
	ctx := context.Background()
	_, err := f.ctl.Set(ctx, []string{"api=2000/day,zone=America/Los_Angeles"}, "test@host")
	require.NoError(t, err)
	require.NoError(t, f.qrdb.ZAdd(ctx, "sluice:parked:{api}", redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "x~1"}).Err())
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := dumpDOM(cctx, t, hs.URL+"/", 390)
	require.NoError(t, err, "%s --dump-dom", chrome)
	dom := string(out)
	assert.Contains(t, dom, `<tr data-type="api">`)
	assert.Regexp(t, `<dd>0 of 2,000 today; resets 00:00 America/Los_Angeles, in \d+h\d\dm</dd>`, dom)
	assert.Regexp(t, `<div class="parked"><dt>parked</dt><dd>1 until 20\d\d-\d\d-\d\d \d\d:\d\d America/Los_Angeles</dd>`, dom)
}
