package limitspec

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// Several specs of one type are one Spec of several named limits: each
// limit's options are its own, the type's are written once on any of them,
// and the cost may be a template; Flags writes it back as specs that
// ParseAll reads to the same Spec.
func TestParseAllNamedLimits(t *testing.T) {
	specs, err := ParseAll([]string{
		"http:request=3000/m,name=requests,key=acct:{header.account}",
		"email:send=10/s",
		"http:request=90000/m,name=tokens,cost={body.max_tokens},burst=20000,global=1000000/h:100000",
	})
	require.NoError(t, err)
	require.Len(t, specs, 2)
	sp := specs[0]
	assert.Equal(t, flat{
		Type: "http:request", Key: "acct:{header.account}",
		Global: &throttle.Limit{Rate: 1e6, Period: time.Hour, Burst: 100000}, Fair: true, Adapt: true,
		Named: []workers.NamedLimit{
			{Name: "requests", Limit: throttle.Limit{Rate: 3000, Period: time.Minute, Burst: 50}},
			{Name: "tokens", Limit: throttle.Limit{Rate: 90000, Period: time.Minute, Burst: 20000}},
		},
		Costs: map[string]string{"tokens": "{body.max_tokens}"},
	}, flatOf(sp))
	assert.NotNil(t, sp.Key)
	assert.Nil(t, sp.Limits[0].CostFrom)
	require.NotNil(t, sp.Limits[1].CostFrom, "a cost template makes a CostFrom")
	n, err := sp.Limits[1].CostFrom(asynq.NewTask("http:request", []byte(`{"url": "https://x/", "body": "{\"max_tokens\": 512}"}`)))
	require.NoError(t, err)
	assert.Equal(t, 512, n)
	assert.Equal(t, "email:send=10/s,burst=10", specs[1].String())

	assert.Equal(t, []string{
		"http:request=3000/m,burst=50,name=requests,key=acct:{header.account},global=1000000/h:100000",
		"http:request=90000/m,burst=20000,name=tokens,cost={body.max_tokens}",
	}, sp.Flags())
	assert.Equal(t, "http:request=3000/m,burst=50,name=requests,key=acct:{header.account},global=1000000/h:100000 "+
		"http:request=90000/m,burst=20000,name=tokens,cost={body.max_tokens}", sp.String())
	again, err := ParseAll(sp.Flags())
	require.NoError(t, err)
	require.Len(t, again, 1)
	assert.Equal(t, flatOf(sp), flatOf(again[0]), "round trip through %q", sp.Flags())
	require.NoError(t, sp.Validate())

	// An unnamed limit beside named ones comes first: it is the type's own
	// bucket, and adapt and floor are about it.
	specs, err = ParseAll([]string{"a=100/h,name=daily", "a=5/s,burst=2,floor=1/s,cost={payload.n}", "a=60/m,name=minute,burst=2,cost=2"})
	require.NoError(t, err)
	sp = specs[0]
	assert.Equal(t, flat{
		Type: "a", Limit: throttle.Limit{Rate: 5, Period: time.Second, Burst: 2}, Adapt: true, Floor: 1,
		Named: []workers.NamedLimit{
			{Name: "daily", Limit: throttle.Limit{Rate: 100, Period: time.Hour, Burst: 1}},
			{Name: "minute", Limit: throttle.Limit{Rate: 60, Period: time.Minute, Burst: 2}, Cost: 2},
		},
		Costs: map[string]string{"": "{payload.n}"},
	}, flatOf(sp))
	assert.NotNil(t, sp.CostFrom)
	assert.Equal(t, []string{"a=5/s,burst=2,cost={payload.n},floor=1/s", "a=100/h,burst=1,name=daily", "a=60/m,burst=2,name=minute,cost=2"}, sp.Flags())
	again, err = ParseAll(sp.Flags())
	require.NoError(t, err)
	assert.Equal(t, flatOf(sp), flatOf(again[0]))

	// One named spec alone is a Spec of one named limit, whose String Parse reads back.
	one, err := Parse("a=5/s,name=requests,cost={header.n}")
	require.NoError(t, err)
	assert.Nil(t, one.Limit)
	assert.Equal(t, "a=5/s,burst=5,name=requests,cost={header.n}", one.String())
	back, err := Parse(one.String())
	require.NoError(t, err)
	assert.Equal(t, flatOf(one), flatOf(back))
	assert.True(t, back.Adapt, "the first limit, a token bucket, adapts by default")
}

func TestParseAllInvalid(t *testing.T) {
	tests := []struct {
		in   []string
		want string // the whole message
	}{
		{[]string{"a=5/s", "a=10/s"},
			`limits of type "a": two limits without name= (give each of the type's limits a name=)`},
		{[]string{"a=5/s,name=r", "a=10/s,name=r"}, `limits of type "a": name "r" given to two of its limits`},
		{[]string{"a=5/s,name=r,key={payload.t}", "a=10/s,name=t,key={payload.t}"},
			`limits of type "a": key given on two of its limits (write it once)`},
		{[]string{"a=5/s,name=r,adapt=off", "a=10/s,name=t,adapt=off"},
			`limits of type "a": adapt given on two of its limits (write it once)`},
		{[]string{"a=5/s,name=r", "a=10/s,name=t,cost=11"},
			`limits of type "a": limit "t": cost 11 is larger than burst 10: no job could ever run`},
		{[]string{"a=5/s,name=r", "a=10/s,name=t,policy=sliding-log,burst=3"},
			`limits of type "a": limit "t": burst does not apply to policy sliding-log (burst is for policy token-bucket)`},
		{[]string{"a=5/s,name="}, `limit "a=5/s,name=": name is empty (leave it out for the type's unnamed limit)`},
		{[]string{"a=5/s,name=r w"}, `limit "a=5/s,name=r w": limit "r w": name "r w" must not contain '=', ',' or spaces`},
		{[]string{"a=5/s,name=r{"}, `limit "a=5/s,name=r{": limit "r{": name "r{" must not contain braces: it names the policy's buckets`},
		{[]string{"a=5/s,cost="}, `limit "a=5/s,cost=": cost is empty (leave it out for 1)`},
		{[]string{"a=5/s,cost=lots"}, `limit "a=5/s,cost=lots": cost "lots" is not a whole number from 1 to 1073741824, nor a template such as {payload.tokens}`},
		{[]string{"a=5/s,cost={payload.n"}, `limit "a=5/s,cost={payload.n": cost template "{payload.n": want one placeholder: {payload.<field>}, {header.<name>} or {body.<field>}`},
		{[]string{"a=5/s,cost={tokens}"}, `limit "a=5/s,cost={tokens}": cost template "{tokens}": unknown placeholder {tokens}: want {payload.<field>}, {header.<name>} or {body.<field>}`},
		{[]string{"a=5/s,cost={payload.}"}, `limit "a=5/s,cost={payload.}": cost template "{payload.}": placeholder {payload.} names no field`},
		{[]string{"a=5/s,cost={payload.a.b}"}, `limit "a=5/s,cost={payload.a.b}": cost template "{payload.a.b}": placeholder {payload.a.b}: only top-level fields are supported`},
		{[]string{"a=5/s,name=t,cost={body.max_tokens}"},
			`limit "a=5/s,name=t,cost={body.max_tokens}": limit "t": cost "{body.max_tokens}": {body.FIELD} is for type http:request, whose payload carries a request body`},
		{[]string{"a=5/s,name=r", "a=5/s,nme=t"}, `limit "a=5/s,nme=t": unknown option "nme" (want name, policy, burst, slots, capacity, key, max-wait, cost, settle, global, in-flight, adapt, floor, fair, weights, priority or priority-floor)`},
	}
	for i, tt := range tests {
		_, err := ParseAll(tt.in)
		require.Error(t, err, "%d: %q", i, tt.in)
		assert.Equal(t, tt.want, err.Error(), "%d: %q", i, tt.in)
		assert.True(t, errors.Is(err, ErrInvalid), "%d: %q matches ErrInvalid", i, tt.in)
	}

	// Global takes the first limit's cost, not another's.
	_, err := ParseAll([]string{"a=5/s,name=r,global=1/s", "a=20/s,name=t,cost=2"})
	require.NoError(t, err)
	_, err = ParseAll([]string{"a=5/s,name=r,global=1/s,cost=2"})
	assert.EqualError(t, err, `limit "a=5/s,name=r,global=1/s,cost=2": cost 2 is larger than global burst 1: no job could ever run`)
}

// A limits file gives a type several named limits as a list under it,
// beside or instead of the one limit an entry always had.
func TestLoadFileNamedLimits(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	json := write("limits.json", `{"limits": [
	  {"type": "http:request", "key": "acct:{header.account}", "limits": [
	    {"name": "requests", "rate": "3000/m"},
	    {"name": "tokens", "rate": "90000/m", "burst": 20000, "cost": "{body.max_tokens}"}
	  ]},
	  {"type": "report", "rate": "3/s", "cost": 1, "limits": [{"name": "daily", "rate": "2000/h", "policy": "fixed-window", "cost": 1}]},
	  {"type": "email:send", "rate": "50/s", "burst": 5}
	]}`)
	yaml := write("limits.yaml", `limits:
  - type: http:request
    key: "acct:{header.account}"
    limits:
      - {name: requests, rate: 3000/m}
      - {name: tokens, rate: 90000/m, burst: 20000, cost: "{body.max_tokens}"}
  - type: report
    rate: 3/s
    cost: 1
    limits:
      - {name: daily, rate: 2000/h, policy: fixed-window, cost: 1}
  - {type: email:send, rate: 50/s, burst: 5}
`)
	want := []flat{
		{Type: "http:request", Key: "acct:{header.account}", Adapt: true,
			Named: []workers.NamedLimit{
				{Name: "requests", Limit: throttle.Limit{Rate: 3000, Period: time.Minute, Burst: 50}},
				{Name: "tokens", Limit: throttle.Limit{Rate: 90000, Period: time.Minute, Burst: 20000}},
			},
			Costs: map[string]string{"tokens": "{body.max_tokens}"}},
		{Type: "report", Limit: throttle.Limit{Rate: 3, Period: time.Second, Burst: 3}, Cost: 1, Adapt: true,
			Named: []workers.NamedLimit{{Name: "daily", Limit: throttle.FixedWindow{Max: 2000, Window: time.Hour}, Cost: 1}}},
		{Type: "email:send", Limit: throttle.Limit{Rate: 50, Period: time.Second, Burst: 5}, Adapt: true},
	}
	for _, path := range []string{json, yaml} {
		got, err := LoadFile(path)
		require.NoError(t, err, path)
		assert.Equal(t, want, flatsOf(got), path)
		// The same as flags: Flags reads back to the file's Spec.
		for _, sp := range got {
			again, err := ParseAll(sp.Flags())
			require.NoError(t, err)
			assert.Equal(t, flatOf(sp), flatOf(again[0]), "%s through %q", path, sp.Flags())
		}
	}

	bad := []struct{ text, want string }{
		{`{"limits": [{"type": "a", "limits": [{"rate": "5/s"}]}]}`, `limits[0] (type "a"): limits[0]: "name" is missing or empty`},
		{`{"limits": [{"type": "a", "limits": [{"name": "r"}]}]}`, `limits[0] (type "a"): limits[0] (name "r"): "rate" is missing or empty (want RATE/UNIT, e.g. "50/s")`},
		{`{"limits": [{"type": "a", "burst": 3, "limits": [{"name": "r", "rate": "5/s"}]}]}`,
			`limits[0] (type "a"): policy, burst, slots, capacity and cost go with "rate" (or in each of "limits")`},
		{`{"limits": [{"type": "a", "limits": [{"name": "r", "rate": "5/s"}, {"name": "r", "rate": "1/s"}]}]}`,
			`limits[0] (type "a"): name "r" given to two of its limits`},
		{`{"limits": [{"type": "a", "limits": [{"name": "r", "rate": "5/s", "cost": "lots"}]}]}`,
			`limits[0]: cost "lots": want a number, or a template such as "{payload.tokens}"`},
		{`{"limits": [{"type": "a", "limits": [{"name": "r", "rate": "5/s", "cost": 0}]}]}`,
			`limits[0] (type "a"): limits[0] (name "r"): cost 0 must be at least 1 (leave it out for 1)`},
		{`{"limits": [{"type": "a", "limits": [{"name": "r", "rate": "5/s", "key": "k"}]}]}`,
			`limits[0]: unknown field "key"`},
	}
	_, err := LoadFile(write("bad.yaml", "limits:\n  - {type: a, limits: [{name: t, rate: 5/s, cost: {payload.n}}]}\n"))
	assert.ErrorContains(t, err, `in YAML, quote a template: cost: "{payload.tokens}"`)
	for i, b := range bad {
		_, err := LoadFile(write("bad.json", b.text))
		require.Error(t, err, "%d", i)
		assert.Contains(t, err.Error(), b.want, "%d", i)
		assert.True(t, errors.Is(err, ErrInvalid), "%d: %v", i, err)
	}
}

// Flags for a type replace its file entry whole, named limits and all.
func TestMergeNamedLimits(t *testing.T) {
	file, err := ParseAll([]string{"a=5/s", "b=1/s,name=r", "b=2/s,name=t"})
	require.NoError(t, err)
	flags, err := ParseAll([]string{"b=9/s,name=x", "a=7/s,name=r", "a=8/s,name=t"})
	require.NoError(t, err)
	got, err := Merge(file, flags)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, []string{"a=7/s,burst=7,name=r", "a=8/s,burst=8,name=t"}, got[0].Flags())
	assert.Equal(t, []string{"b=9/s,burst=9,name=x"}, got[1].Flags())
	got[0].Limits[0].Name = "changed"
	assert.Equal(t, "r", flags[1].Limits[0].Name, "Merge's result shares no memory with its input")
}
