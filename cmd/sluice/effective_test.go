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

// A limit with a key template and a global limit shows its global bucket's
// effective rate, which the upstream's answers set (issue #30): a refusal
// lowered it to 60 % of the global 100/s. With adapt=key the rate is each
// key's own: none is shown.
func TestLimitsShowTheGlobalEffectiveRate(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want float64 // 0: none shown
	}{
		{"http:request=50/s,burst=5,key=tenant:{header.sluice-key},global=100/s", 60},
		{"http:request=50/s,burst=5,key=tenant:{header.sluice-key},global=100/s,adapt=key", 0},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			srv := redistest.Start(t)
			ctl := control.New(srv.Client(t), "sluice:")
			require.NoError(t, ctl.Beat(context.Background(), control.Heartbeat{
				ID: "w1:42:1", Host: "w1", PID: 42, Mode: "shared", Seen: time.Now(),
				Limits: []control.LimitState{{Type: "http:request", Spec: tc.spec, Source: "flag"}},
			}))
			sp, err := limitspec.Parse(tc.spec)
			require.NoError(t, err)
			lim := throttle.NewLimiter(throttle.NewRedisStore(srv.Client(t)), throttle.WithKeyPrefix("sluice:"))
			// The upstream refused a job: the pool reports it to the upstream's bucket.
			global := throttle.Adaptive{Ceiling: throttle.Limit{Rate: 100, Period: time.Second, Burst: 100}}
			_, _, err = lim.Refused(context.Background(), workers.GlobalKey(sp.Policy), global)
			require.NoError(t, err)

			r := runArgs("--redis", srv.URL(), "limits", "--json")
			require.Equal(t, 0, r.code, r.stderr)
			var views []limitView
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
			require.Len(t, views, 1)
			assert.True(t, views[0].Keyed)
			if tc.want == 0 {
				assert.Empty(t, views[0].EffectiveWhy)
				return
			}
			assert.Equal(t, "429", views[0].EffectiveWhy)
			assert.InDelta(t, tc.want, views[0].Effective, 1e-9)
		})
	}
}
