package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/browsertest"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// sluice limits shows the priority levels of a limit with priorities as its
// bucket knows them: each level's part of the rate now and its jobs sent
// back to their places, in text and JSON.
func TestLimitsPriorities(t *testing.T) {
	srv := redistest.Start(t)
	url := srv.URL()
	r := runArgs("set", "send=1/m,burst=1,priority=on", "--redis", url)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)

	// Jobs of priorities 1 and 5 on the type's bucket, as the pool books them.
	lim := throttle.NewLimiter(throttle.NewRedisStore(srv.Client(t)))
	limit := throttle.Limit{Rate: 1, Period: time.Minute, Burst: 1} // turns a minute apart: the levels stay ahead for the test
	take := func(level int) error {
		_, err := lim.ReserveAll(context.Background(), []throttle.Bucket{{Key: "send", Limit: limit,
			Share: &throttle.Share{Tenant: "send", Priority: level, Horizon: time.Minute}}}, time.Hour)
		return err
	}
	require.NoError(t, take(5))
	require.NoError(t, take(1))

	r = runArgs("--redis", url, "limits", "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var views []limitView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &views), r.stdout)
	require.Len(t, views, 1)
	require.Len(t, views[0].Levels, 2, r.stdout)
	assert.Equal(t, 1, views[0].Levels[0].Priority)
	assert.InDelta(t, 0.95, views[0].Levels[0].Share, 1e-9, "the highest level with work: all but the floor")
	assert.Equal(t, 5, views[0].Levels[1].Priority)
	assert.InDelta(t, 0.05, views[0].Levels[1].Share, 1e-9, "the floor")
	assert.Positive(t, views[0].Levels[1].AheadS)

	r = runArgs("--redis", url, "limits")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "send: priorities with turns booked now")
	assert.Regexp(t, `\n\s+1\s+95%\s+`, r.stdout)
	assert.Regexp(t, `\n\s+5\s+5%\s+`, r.stdout)
}

// The dashboard shows the priorities of a limit's shared bucket: in its
// state, and on the page in a real headless browser (where one is found).
func TestDashboardPriorities(t *testing.T) {
	hs, f := newDashboard(t, "")
	ctx := context.Background()
	_, err := f.ctl.Set(ctx, []string{"send=1/m,burst=1,priority=on"}, "test")
	require.NoError(t, err)
	limit := throttle.Limit{Rate: 1, Period: time.Minute, Burst: 1} // turns a minute apart: the levels stay ahead for the test
	for _, level := range []int{5, 1} {
		_, err := f.lim.ReserveAll(ctx, []throttle.Bucket{{Key: "send", Limit: limit,
			Share: &throttle.Share{Tenant: "send", Priority: level, Horizon: time.Minute}}}, time.Hour)
		require.NoError(t, err)
	}

	resp, err := http.Get(hs.URL + "/api/state")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st state
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	var send *limitView
	for i := range st.Limits {
		if st.Limits[i].Type == "send" {
			send = &st.Limits[i]
		}
	}
	require.NotNil(t, send, "the runtime limit is listed")
	require.Len(t, send.Levels, 2)
	assert.Equal(t, 1, send.Levels[0].Priority)

	chrome := browsertest.Path(t)
	bctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := dumpDOM(bctx, t, hs.URL+"/", 390)
	require.NoError(t, err, "%s --dump-dom", chrome)
	assert.Contains(t, string(out), `<tr class="level" data-priority="1"><th scope="row">1</th><td class="num">95%</td>`, "the type's section names its priorities")
	assert.Contains(t, string(out), `<tr class="level" data-priority="5"><th scope="row">5</th><td class="num">5%</td>`)
}
