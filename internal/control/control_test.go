package control

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/limitspec"
	"github.com/sluicehq/sluice/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestSetUnsetLimits(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Shared(t).Client(t)
	c := New(rdb, redistest.Prefix(t))
	sub := c.Subscribe(ctx)
	defer sub.Close()
	_, err := sub.Receive(ctx) // the subscription is in place
	require.NoError(t, err)

	sp, err := c.Set(ctx, []string{"http:request=20/s,burst=2"}, "ops@host")
	require.NoError(t, err)
	assert.Equal(t, "http:request", sp.Name)
	msg := <-sub.Channel()
	assert.Equal(t, "http:request", msg.Payload, "workers are told")

	got, bad, err := c.Limits(ctx)
	require.NoError(t, err)
	assert.Empty(t, bad)
	require.Contains(t, got, "http:request")
	assert.Equal(t, "http:request=20/s,burst=2", got["http:request"].Spec)
	assert.Equal(t, "ops@host", got["http:request"].By)
	assert.WithinDuration(t, time.Now(), got["http:request"].At, 5*time.Second)

	_, err = c.Set(ctx, []string{"http:request=fast"}, "ops@host")
	require.ErrorIs(t, err, limitspec.ErrInvalid, "refused when set")
	got, _, err = c.Limits(ctx)
	require.NoError(t, err)
	assert.Equal(t, "http:request=20/s,burst=2", got["http:request"].Spec, "never half-applied")

	had, err := c.Unset(ctx, "http:request")
	require.NoError(t, err)
	assert.True(t, had)
	had, err = c.Unset(ctx, "http:request")
	require.NoError(t, err)
	assert.False(t, had)
	got, _, err = c.Limits(ctx)
	require.NoError(t, err)
	assert.Empty(t, got)

	// An entry that no longer parses is reported, not dropped.
	require.NoError(t, rdb.HSet(ctx, c.limitsKey(), "odd", "{nope").Err())
	_, bad, err = c.Limits(ctx)
	require.NoError(t, err)
	assert.Contains(t, bad, "odd")
}

func TestHeartbeats(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Shared(t).Client(t)
	c := New(rdb, redistest.Prefix(t))
	now := time.Now()
	h := Heartbeat{ID: "h1:1:1", Host: "h1", PID: 1, Mode: "shared", Seen: now,
		Limits: []LimitState{{Type: "sleep", Spec: "sleep=5/s", Source: "flag", Grants: 4.5}}}
	require.NoError(t, c.Beat(ctx, h))
	old := Heartbeat{ID: "h2:2:2", Host: "h2", PID: 2, Seen: now.Add(-2 * HeartbeatTTL)}
	require.NoError(t, c.Beat(ctx, old))
	require.NoError(t, c.Beat(ctx, Heartbeat{ID: "h3:3:3", Host: "h3", PID: 3, Seen: now}))

	hbs, err := c.Workers(ctx)
	require.NoError(t, err)
	require.Len(t, hbs, 2, "an old heartbeat is not a live worker")
	assert.Equal(t, "h1", hbs[0].Host)
	assert.Equal(t, h.Limits, hbs[0].Limits)
	n, err := rdb.ZCard(ctx, c.workersKey()).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "the index is pruned")
	ttl, err := rdb.TTL(ctx, c.workerKey("h1:1:1")).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, time.Duration(0), "a heartbeat expires on its own")

	require.NoError(t, c.Gone(ctx, "h1:1:1"))
	hbs, err = c.Workers(ctx)
	require.NoError(t, err)
	require.Len(t, hbs, 1)

	big := Heartbeat{ID: "big", Seen: now}
	for range 5000 {
		big.Limits = append(big.Limits, LimitState{Type: "a-long-type-name", Spec: "a-long-type-name=100/s"})
	}
	assert.ErrorContains(t, c.Beat(ctx, big), "more than", "bounded in size")
}

// A type of several named limits is set whole, one spec per limit, and read
// back as one limit of that type; specs for two types at once are refused.
func TestSetNamedLimits(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Shared(t).Client(t)
	c := New(rdb, redistest.Prefix(t))

	specs := []string{"http:request=3000/m,name=requests", "http:request=90000/m,name=tokens,burst=20000,cost={body.max_tokens}"}
	sp, err := c.Set(ctx, specs, "ops@host")
	require.NoError(t, err)
	assert.Len(t, sp.Limits, 2)
	got, bad, err := c.Limits(ctx)
	require.NoError(t, err)
	assert.Empty(t, bad)
	e := got["http:request"]
	assert.Equal(t, []string{"http:request=3000/m,burst=50,name=requests", "http:request=90000/m,burst=20000,name=tokens,cost={body.max_tokens}"}, e.Specs)
	assert.Equal(t, strings.Join(e.Specs, " "), e.Spec, "Spec is for people to read")
	back, err := e.Parse()
	require.NoError(t, err)
	assert.Equal(t, sp.Flags(), back.Flags())
	require.NotNil(t, back.Limits[1].CostFrom)

	_, err = c.Set(ctx, []string{"a=1/s", "b=1/s"}, "ops@host")
	assert.ErrorIs(t, err, limitspec.ErrInvalid)
	_, err = c.Set(ctx, []string{"a=1/s", "a=2/s"}, "ops@host")
	assert.ErrorContains(t, err, "two limits without name=")
	got, _, err = c.Limits(ctx)
	require.NoError(t, err)
	assert.Len(t, got, 1, "nothing stored for refused specs")

	// A heartbeat's limit reads the same way.
	ls := LimitState{Type: "http:request"}
	ls.Spec, ls.Specs = SpecsOf(sp)
	again, err := ls.Parse()
	require.NoError(t, err)
	assert.Equal(t, sp.String(), again.String())
}
