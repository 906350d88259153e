package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/throttle"
)

// A spec is the pool's policy: every field reaches it, the key template
// made a KeyFunc.
func TestSpecPolicy(t *testing.T) {
	got, err := loadLimits([]string{"email:send=100/m,burst=10,key=tenant:{payload.tenant},max-wait=2s,cost=2,global=500/s:50,in-flight=5"}, "")
	require.NoError(t, err)
	require.Len(t, got, 1)
	pol := got[0].spec.Policy
	assert.Equal(t, "email:send", pol.Name)
	assert.Equal(t, 5, pol.InFlight)
	assert.Equal(t, throttle.Limit{Rate: 100, Period: time.Minute, Burst: 10}, pol.Limit)
	assert.Equal(t, throttle.Limit{Rate: 500, Period: time.Second, Burst: 50}, pol.Global, "a value")
	assert.Equal(t, 2, pol.Cost)
	assert.Equal(t, 2*time.Second, pol.MaxWait)
	require.NotNil(t, pol.Key)
	key, err := pol.Key(asynq.NewTask("email:send", []byte(`{"tenant": "acme"}`)))
	require.NoError(t, err)
	assert.Equal(t, "tenant:acme", key)

	got, err = loadLimits([]string{"http:request=50/s"}, "")
	require.NoError(t, err)
	pol = got[0].spec.Policy
	assert.Equal(t, "http:request", pol.Name)
	assert.Equal(t, throttle.Limit{Rate: 50, Period: time.Second, Burst: 50}, pol.Limit)
	assert.Nil(t, pol.Key, "no template: one bucket, named after the type")
	assert.Nil(t, pol.Global)
	assert.Equal(t, 0, pol.Cost)
	assert.Equal(t, 0, pol.InFlight, "no bound")
	assert.Equal(t, time.Duration(0), pol.MaxWait, "the worker's --max-wait")

	// Every policy reaches the pool.
	for in, want := range map[string]throttle.Policy{
		"http:request=40/s,policy=sliding-log":               throttle.SlidingLog{Max: 40, Window: time.Second},
		"http:request=50/s,policy=leaky-bucket,capacity=100": throttle.LeakyBucket{Rate: 50, Period: time.Second, Capacity: 100},
	} {
		got, err = loadLimits([]string{in}, "")
		require.NoError(t, err, in)
		assert.Equal(t, want, got[0].spec.Limit, in)
	}
}

// A --limit replaces the file's entry for its type, in the file's place;
// errors name the spec as written, or the file and the type.
func TestLoadLimits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"limits": [
		{"type": "http:request", "rate": "10/s"},
		{"type": "sleep", "rate": "5/s", "burst": 2}
	]}`), 0o600))

	got, err := loadLimits([]string{"report:build=1/m", "http:request=50/s,burst=5"}, path)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, "http:request", got[0].spec.Name)
	assert.Equal(t, throttle.Limit{Rate: 50, Period: time.Second, Burst: 5}, got[0].spec.Limit)
	assert.Equal(t, `limit "http:request=50/s,burst=5"`, got[0].source)
	assert.Equal(t, "sleep", got[1].spec.Name)
	assert.Equal(t, throttle.Limit{Rate: 5, Period: time.Second, Burst: 2}, got[1].spec.Limit)
	assert.Equal(t, `limits file "`+path+`", type "sleep"`, got[1].source)
	assert.Equal(t, "report:build", got[2].spec.Name)

	got, err = loadLimits(nil, "")
	require.NoError(t, err)
	assert.Empty(t, got)
}

// settle= on a named limit reaches the pool's policy as its SettleFrom.
func TestSpecPolicySettle(t *testing.T) {
	got, err := loadLimits([]string{
		"http:request=3000/m,name=requests",
		"http:request=90000/m,burst=20000,name=tokens,cost={body.max_tokens},settle={answer.usage.total_tokens}",
	}, "")
	require.NoError(t, err)
	require.Len(t, got, 1)
	pol := got[0].spec.Policy
	require.Len(t, pol.Limits, 2)
	assert.Nil(t, pol.Limits[0].SettleFrom)
	require.NotNil(t, pol.Limits[1].SettleFrom)
	n, err := pol.Limits[1].SettleFrom(nil, []byte(`{"usage": {"total_tokens": 180}}`))
	require.NoError(t, err)
	assert.Equal(t, 180, n)

	_, err = loadLimits([]string{"sleep=5/s,name=t,settle={answer.usage.total_tokens}"}, "")
	assert.ErrorContains(t, err, "is for type http:request")
}
