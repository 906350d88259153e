package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/limitspec"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

func intp(n int) *int { return &n }

// The rule over a type's buckets: what binds, in the hard cases.
func TestBind(t *testing.T) {
	perKey := func(capacity float64) bucketView {
		return bucketView{Name: "per key tenant:{header.sluice-key}", Kind: "key", RatePerS: 50, EffectivePerS: 50,
			Cause: "the workers' --limit flag", CapacityPerS: capacity}
	}
	global := func(eff float64, cause string) bucketView {
		return bucketView{Name: "global", Kind: "global", RatePerS: 60, EffectivePerS: eff, Cause: cause, CapacityPerS: eff}
	}
	quota := func(spent bool) bucketView {
		b := bucketView{Name: "quota", Kind: "quota", RatePerS: 0.02, EffectivePerS: 0.02, Cause: "10 of 2,000 today", CapacityPerS: -1}
		if spent {
			b.EffectivePerS, b.CapacityPerS, b.Cause = 0, 0, "spent: 2,000 of 2,000 today"
		}
		return b
	}
	flight := func(free int) bucketView {
		return bucketView{Name: "in flight", Kind: "in_flight", RatePerS: 16, EffectivePerS: 8, Tokens: intp(free),
			Cause: "8 of 8 slots held (auto, gradient)", CapacityPerS: -1}
	}
	for i, tc := range []struct {
		name    string
		buckets []bucketView
		d       bindDemand
		binding string
		why     string
	}{
		{"adaptive below the per-key capacity", []bucketView{perKey(100), global(40, "announced by the upstream 40/s at 14:02 UTC")},
			bindDemand{Grants: 39.8, Queued: 120}, "global", "global binds: announced by the upstream 40/s at 14:02 UTC; 39.8 grants/s, 120 queued"},
		{"the per-key capacity below the global", []bucketView{perKey(50), global(60, "the workers' --limit flag")},
			bindDemand{Grants: 49, Waiting: 3}, "per key tenant:{header.sluice-key}",
			"per key tenant:{header.sluice-key} binds: the workers' --limit flag; 49.0 grants/s, 3 waiting"},
		{"cooldown wins", []bucketView{perKey(100), global(0, "cooling down 12s after a 429 or 503 (or sluice cooldown)")},
			bindDemand{Grants: 2, Queued: 5}, "global", "global binds: cooling down 12s after a 429 or 503 (or sluice cooldown); 2.0 grants/s, 5 queued"},
		{"quota spent wins over a full in-flight bound", []bucketView{global(60, "configured"), quota(true), flight(0)},
			bindDemand{Waiting: 4, Queued: 1204}, "quota", "quota binds: spent: 2,000 of 2,000 today; 0.0 grants/s, 4 waiting, 1,204 queued"},
		{"in flight full", []bucketView{global(60, "configured"), quota(false), flight(0)},
			bindDemand{Grants: 8, Waiting: 4}, "in flight", "in flight binds: 8 of 8 slots held (auto, gradient); 8.0 grants/s, 4 waiting"},
		{"in flight full but nothing waits: under every limit", []bucketView{global(60, "configured"), flight(0)},
			bindDemand{Grants: 8}, "", "nothing binds: 8.0 grants/s, under every limit"},
		{"at 90 % of the capacity with nothing queued", []bucketView{global(40, "configured")},
			bindDemand{Grants: 36.1}, "global", "global binds: configured; 36.1 grants/s"},
		{"under every limit", []bucketView{perKey(100), global(40, "configured")},
			bindDemand{Grants: 3.2}, "", "nothing binds: 3.2 grants/s, under every limit"},
		{"idle", []bucketView{perKey(-1), global(40, "configured")}, bindDemand{}, "", "idle"},
		{"idle while cooling down", []bucketView{global(0, "cooling down 3s")}, bindDemand{}, "", "idle"},
		{"only unknown capacities", []bucketView{perKey(-1)}, bindDemand{Grants: 7, Queued: 9}, "",
			"no bucket is known to bind: 7.0 grants/s, 9 queued (a per-key limit's capacity depends on the keys with work)"},
	} {
		binding, why := bind(tc.buckets, tc.d)
		assert.Equal(t, tc.binding, binding, "%d %s", i, tc.name)
		assert.Equal(t, tc.why, why, "%d %s", i, tc.name)
		for _, b := range tc.buckets {
			assert.Equal(t, b.Name == tc.binding, b.Binds, "%d %s: %s", i, tc.name, b.Name)
		}
	}
}

// The causes, at a fixed instant.
func TestCauses(t *testing.T) {
	now := time.Date(2026, 11, 27, 14, 5, 30, 0, time.UTC)
	for i, tc := range []struct {
		st   throttle.AdaptState
		perS float64
		want string
	}{
		{throttle.AdaptState{Reason: "header", Age: 3*time.Minute + 10*time.Second}, 40, "announced by the upstream 40/s at 14:02 UTC"},
		{throttle.AdaptState{Reason: "header", Age: time.Hour}, 0.5, "announced by the upstream 30/m at 13:05 UTC"},
		{throttle.AdaptState{Reason: "429", Age: 30 * time.Second}, 36, "lowered after 429s at 14:05 UTC"},
		{throttle.AdaptState{Reason: "recovery", Age: 2 * time.Minute}, 50, "recovering after 429s, last raised at 14:03 UTC"},
		{throttle.AdaptState{Reason: "cold"}, 60, "cold start: waiting for the upstream's first answer"},
		{throttle.AdaptState{Reason: "ceiling", Age: time.Hour}, 60, "the workers' limits file"},
	} {
		assert.Equal(t, tc.want, adaptCause(tc.st, tc.perS, "the workers' limits file", now), "%d", i)
	}
	set := time.Date(2026, 11, 27, 9, 41, 0, 0, time.FixedZone("CET", 3600))
	assert.Equal(t, "runtime limit set by alice@host at 08:41 UTC", sourceCause("runtime", "alice@host", set))
	assert.Equal(t, "the workers' --limit flag", sourceCause("flag", "", time.Time{}))
	assert.Equal(t, "the workers' limits file", sourceCause("file", "", time.Time{}))
	assert.Equal(t, "cooling down 12s after a 429 or 503 (or sluice cooldown)", coolingCause(11.2))
	assert.Equal(t, "2.5/s", rateText(2.5))
	assert.Equal(t, "12/h", rateText(12.0/3600))
}

// Over a real Redis: a key template with a global bucket the upstream
// announced 40/s for binds at the global bucket; a cooldown then binds it
// at 0; a runtime limit's cause names who set it.
func TestBindingLive(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	spec := "http:request=50/s,burst=5,key=tenant:{header.sluice-key},global=60/s:6"
	ctl := control.New(srv.Client(t), "sluice:")
	require.NoError(t, ctl.Beat(ctx, control.Heartbeat{
		ID: "w1:42:1", Host: "w1", PID: 42, Mode: "shared", Seen: time.Now(),
		Limits: []control.LimitState{{Type: "http:request", Spec: spec, Source: "flag", Grants: 39.8, Waiting: 7}},
	}))
	sp, err := limitspec.Parse(spec)
	require.NoError(t, err)
	lim := throttle.NewLimiter(throttle.NewRedisStore(srv.Client(t)), throttle.WithKeyPrefix("sluice:"))
	global := throttle.Adaptive{Ceiling: throttle.Limit{Rate: 60, Period: time.Second, Burst: 6}}
	_, _, err = lim.Announced(ctx, workers.GlobalKey(sp.Policy), global, 40)
	require.NoError(t, err)

	first := func() limitView {
		t.Helper()
		r := runArgs("--redis", srv.URL(), "limits", "--json")
		require.Equal(t, 0, r.code, r.stderr)
		var views []limitView
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
		require.Len(t, views, 1)
		return views[0]
	}
	v := first()
	require.Len(t, v.Buckets, 2)
	assert.Equal(t, "key", v.Buckets[0].Kind)
	assert.InDelta(t, -1, v.Buckets[0].CapacityPerS, 0, "no fair shares booked: the keys with work are unknown")
	g := v.Buckets[1]
	assert.Equal(t, "global", g.Kind)
	assert.InDelta(t, 60, g.RatePerS, 1e-9)
	assert.InDelta(t, 40, g.EffectivePerS, 1e-9)
	assert.Regexp(t, `^announced by the upstream 40/s at \d\d:\d\d UTC$`, g.Cause)
	assert.True(t, g.Binds)
	assert.Equal(t, "global", v.Binding)
	assert.Regexp(t, `^global binds: announced by the upstream 40/s at \d\d:\d\d UTC; 39.8 grants/s, 7 waiting$`, v.Why)

	r := runArgs("--redis", srv.URL(), "limits")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `\nhttp:request: global binds: announced by the upstream 40/s at \d\d:\d\d UTC; 39.8 grants/s, 7 waiting\n`, r.stdout,
		"the Why line below the table")

	_, err = lim.Cooldown(ctx, workers.GlobalKey(sp.Policy), sp.Global, 20*time.Second)
	require.NoError(t, err)
	v = first()
	g = v.Buckets[1]
	assert.InDelta(t, 0, g.EffectivePerS, 0)
	assert.InDelta(t, 0, g.CapacityPerS, 0)
	assert.Regexp(t, `^cooling down (19|20)s after a 429 or 503`, g.Cause)
	assert.Equal(t, "global", v.Binding)

	r = runArgs("--redis", srv.URL(), "set", "http:request=20/s,key=tenant:{header.sluice-key},global=30/s")
	require.Equal(t, 0, r.code, r.stderr)
	v = first()
	assert.Equal(t, "runtime", v.Source)
	assert.Regexp(t, `^runtime limit set by .+@.+ at \d\d:\d\d UTC$`, v.Buckets[0].Cause)
}

// A type without a key: its own bucket lowered after a 429 binds while
// jobs are queued; an automatic in-flight bound shows its slots.
func TestBindingOwnBucket(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	spec := "sleep=10/s,burst=2,in-flight=auto:2-8"
	ctl := control.New(srv.Client(t), "sluice:")
	require.NoError(t, ctl.Beat(ctx, control.Heartbeat{
		ID: "w1:42:1", Host: "w1", PID: 42, Mode: "shared", Seen: time.Now(),
		Limits: []control.LimitState{{Type: "sleep", Spec: spec, Source: "file", Grants: 1}},
	}))
	sp, err := limitspec.Parse(spec)
	require.NoError(t, err)
	lim := throttle.NewLimiter(throttle.NewRedisStore(srv.Client(t)), throttle.WithKeyPrefix("sluice:"))
	key, a, ok := workers.UpstreamAdaptive(sp.Policy)
	require.True(t, ok)
	_, _, err = lim.Refused(ctx, key, a)
	require.NoError(t, err)

	r := runArgs("--redis", srv.URL(), "limits", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var views []limitView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
	require.Len(t, views, 1)
	v := views[0]
	require.Len(t, v.Buckets, 2)
	own := v.Buckets[0]
	assert.Equal(t, "own", own.Kind)
	assert.Less(t, own.EffectivePerS, 10.0)
	assert.Regexp(t, `^lowered after 429s at \d\d:\d\d UTC$`, own.Cause)
	assert.Equal(t, "in_flight", v.Buckets[1].Kind)
	assert.Contains(t, v.Buckets[1].Cause, "slots held (auto, ")
	assert.Equal(t, "", v.Binding, "1 grant/s, nothing waiting or queued: under every limit")
	assert.Equal(t, "nothing binds: 1.0 grants/s, under every limit", v.Why)
}
