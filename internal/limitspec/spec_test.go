package limitspec

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/throttle"
)

func TestParseValid(t *testing.T) {
	global := func(rate float64, period time.Duration, burst int) *throttle.Limit {
		return &throttle.Limit{Rate: rate, Period: period, Burst: burst}
	}
	tests := []struct {
		in   string
		want flat
	}{
		{"http:request=50/s,burst=5", flat{Type: "http:request", Limit: throttle.Limit{Rate: 50, Period: time.Second, Burst: 5}}},
		{"email:send=100/m,burst=10,key=tenant:{payload.tenant}", flat{
			Type: "email:send", Limit: throttle.Limit{Rate: 100, Period: time.Minute, Burst: 10}, Key: "tenant:{payload.tenant}",
		}},
		// Default bursts: ceil(tokens per second), at least 1.
		{"a=50/s", flat{Type: "a", Limit: throttle.Limit{Rate: 50, Period: time.Second, Burst: 50}}},
		{"a=100/m", flat{Type: "a", Limit: throttle.Limit{Rate: 100, Period: time.Minute, Burst: 2}}},
		{"a=60/m", flat{Type: "a", Limit: throttle.Limit{Rate: 60, Period: time.Minute, Burst: 1}}},
		{"a=0.5/s", flat{Type: "a", Limit: throttle.Limit{Rate: 0.5, Period: time.Second, Burst: 1}}},
		{"a=7200/h", flat{Type: "a", Limit: throttle.Limit{Rate: 7200, Period: time.Hour, Burst: 2}}},
		{"a=2.5/s", flat{Type: "a", Limit: throttle.Limit{Rate: 2.5, Period: time.Second, Burst: 3}}},
		// Policies: RATE/UNIT is Max per Window for the window policies.
		{"a=40/s,policy=sliding-log", flat{Type: "a", Limit: throttle.SlidingLog{Max: 40, Window: time.Second}}},
		{"a=100/m,policy=fixed-window", flat{Type: "a", Limit: throttle.FixedWindow{Max: 100, Window: time.Minute}}},
		{"a=100/m,policy=sliding-window", flat{Type: "a", Limit: throttle.SlidingWindow{Max: 100, Window: time.Minute, Slots: 10}}},
		{"a=100/m,policy=sliding-window,slots=6", flat{Type: "a", Limit: throttle.SlidingWindow{Max: 100, Window: time.Minute, Slots: 6}}},
		{"a=50/s,policy=leaky-bucket,capacity=100", flat{Type: "a", Limit: throttle.LeakyBucket{Rate: 50, Period: time.Second, Capacity: 100}}},
		{"a=50/s,policy=leaky-bucket", flat{Type: "a", Limit: throttle.LeakyBucket{Rate: 50, Period: time.Second, Capacity: 50}}},
		{"a=5/s,policy=token-bucket,burst=2", flat{Type: "a", Limit: throttle.Limit{Rate: 5, Period: time.Second, Burst: 2}}},
		{"a=40/s,policy=sliding-log,cost=4,global=100/s,in-flight=3", flat{Type: "a", Limit: throttle.SlidingLog{Max: 40, Window: time.Second}, Cost: 4,
			Global: global(100, time.Second, 100), InFlight: 3}},
		// Long unit names, spaces around parts.
		{"a=1/sec", flat{Type: "a", Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}}},
		{"a=1/second", flat{Type: "a", Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}}},
		{"a=1/min", flat{Type: "a", Limit: throttle.Limit{Rate: 1, Period: time.Minute, Burst: 1}}},
		{"a=1/minute", flat{Type: "a", Limit: throttle.Limit{Rate: 1, Period: time.Minute, Burst: 1}}},
		{"a=1/hour", flat{Type: "a", Limit: throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}}},
		{"a=1/Hours", flat{Type: "a", Limit: throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}}},
		{" a = 3 / s , burst = 4 ", flat{Type: "a", Limit: throttle.Limit{Rate: 3, Period: time.Second, Burst: 4}}},
		// Every option.
		{"llm:call=500/m,burst=20,key={type}:{payload.account},max-wait=2s,cost=3,global=5000/m:100", flat{
			Type:    "llm:call",
			Limit:   throttle.Limit{Rate: 500, Period: time.Minute, Burst: 20},
			Key:     "{type}:{payload.account}",
			MaxWait: 2 * time.Second,
			Cost:    3,
			Global:  global(5000, time.Minute, 100),
			Fair:    true,
		}},
		{"a=1/s,global=10/s", flat{Type: "a", Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}, Global: global(10, time.Second, 10)}},
		{"a=1/s,in-flight=5", flat{Type: "a", Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}, InFlight: 5}},
		{"a=10/s,key=k=v", flat{Type: "a", Limit: throttle.Limit{Rate: 10, Period: time.Second, Burst: 10}, Key: "k=v"}},
		// Options in any order.
		{"a=10/s,cost=2,burst=4", flat{Type: "a", Limit: throttle.Limit{Rate: 10, Period: time.Second, Burst: 4}, Cost: 2}},
		// Adapting: on by default for a token bucket (set by the loop), off on request.
		{"a=50/s,burst=5,adapt=on,floor=5/s", flat{Type: "a", Limit: throttle.Limit{Rate: 50, Period: time.Second, Burst: 5}, Floor: 5}},
		{"a=50/m,burst=5,floor=0.5/s", flat{Type: "a", Limit: throttle.Limit{Rate: 50, Period: time.Minute, Burst: 5}, Floor: 30}},
		// The fastest bucket throttle allows: one token per nanosecond (it
		// does not adapt: no faster than one per µs does).
		{"a=1000000000/s,burst=1", flat{Type: "a", Limit: throttle.Limit{Rate: 1e9, Period: time.Second, Burst: 1}, Adapt: true}},
		{"a=2000000/s,adapt=on", flat{Type: "a", Limit: throttle.Limit{Rate: 2e6, Period: time.Second, Burst: 2000000}, Adapt: true}},
	}
	for i, tt := range tests {
		if l, bucket := tt.want.Limit.(throttle.Limit); bucket && l.Rate <= 1e6 {
			tt.want.Adapt = true // a token bucket adapts unless adapt=off, or faster than 1/µs
		}
		got, err := Parse(tt.in)
		require.NoError(t, err, "%d: %q", i, tt.in)
		assert.Equal(t, tt.want, flatOf(got), "%d: %q", i, tt.in)
		assert.Equal(t, got.KeyTemplate != "", got.Key != nil, "%d: %q: a key template makes a Key", i, tt.in)

		again, err := Parse(got.String())
		require.NoError(t, err, "%d: String() = %q", i, got.String())
		assert.Equal(t, flatOf(got), flatOf(again), "%d: round trip through %q", i, got.String())
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		in   string
		want string // the whole message
	}{
		{"x=50/q", `limit "x=50/q": unknown unit "q" (want s, m or h)`},
		{"a=5/s,policy=sliding-log,burst=3", `limit "a=5/s,policy=sliding-log,burst=3": burst does not apply to policy sliding-log (burst is for policy token-bucket)`},
		{"a=5/s,slots=3", `limit "a=5/s,slots=3": slots does not apply to policy token-bucket (slots is for policy sliding-window)`},
		{"a=5/s,policy=fixed-window,capacity=3", `limit "a=5/s,policy=fixed-window,capacity=3": capacity does not apply to policy fixed-window (capacity is for policy leaky-bucket)`},
		{"a=5/s,policy=leaky-bucket,slots=3", `limit "a=5/s,policy=leaky-bucket,slots=3": slots does not apply to policy leaky-bucket (slots is for policy sliding-window)`},
		{"a=5/s,policy=gcra", `limit "a=5/s,policy=gcra": unknown policy "gcra" (want token-bucket, fixed-window, sliding-log, sliding-window, leaky-bucket)`},
		{"a=2.5/s,policy=sliding-log", `limit "a=2.5/s,policy=sliding-log": rate 2.5 is not a whole number: with policy sliding-log, RATE/UNIT is the most per UNIT`},
		{"a=5/s,policy=sliding-log,cost=6", `limit "a=5/s,policy=sliding-log,cost=6": cost 6 is larger than max 5: no job could ever run`},
		{"a=5/s,policy=leaky-bucket,capacity=2,cost=3", `limit "a=5/s,policy=leaky-bucket,capacity=2,cost=3": cost 3 is larger than capacity 2: no job could ever run`},
		{"a=20000/s,policy=sliding-log", `limit "a=20000/s,policy=sliding-log": max 20000 is larger than 10000`},
		{"a=7/m,policy=sliding-window,slots=7", `limit "a=7/m,policy=sliding-window,slots=7": window 1m0s is not a whole number of microseconds per slot over 7 slots`},
		{"a=5/s,policy=sliding-log,policy=fixed-window", `limit "a=5/s,policy=sliding-log,policy=fixed-window": policy given twice`},
		{"", `limit "": want TYPE=RATE/UNIT, e.g. http:request=50/s`},
		{"http:request", `limit "http:request": want TYPE=RATE/UNIT, e.g. http:request=50/s`},
		{"=50/s", `limit "=50/s": type is empty`},
		{"a=50", `limit "a=50": rate "50" has no unit: want RATE/UNIT, e.g. 50/s`},
		{"a=/s", `limit "a=/s": rate "" is not a positive decimal number`},
		{"a=0/s", `limit "a=0/s": rate "0" is not a positive decimal number`},
		{"a=0.0/s", `limit "a=0.0/s": rate "0.0" is not a positive decimal number`},
		{"a=-1/s", `limit "a=-1/s": rate "-1" is not a positive decimal number`},
		{"a=1e3/s", `limit "a=1e3/s": rate "1e3" is not a positive decimal number`},
		{"a=Inf/s", `limit "a=Inf/s": rate "Inf" is not a positive decimal number`},
		{"a=.5/s", `limit "a=.5/s": rate ".5" is not a positive decimal number`},
		{"a=5./s", `limit "a=5./s": rate "5." is not a positive decimal number`},
		{"a=0x10/s", `limit "a=0x10/s": rate "0x10" is not a positive decimal number`},
		{"a=5/d", `limit "a=5/d": unknown unit "d" (want s, m or h)`},
		{"a=5/", `limit "a=5/": unknown unit "" (want s, m or h)`},
		{"a=5/1s", `limit "a=5/1s": unknown unit "1s" (want s, m or h)`},
		{"a=2000000000/s", `limit "a=2000000000/s": rate 2e+09 per 1s is faster than one token per nanosecond`},
		{"a=5/s,", `limit "a=5/s,": empty option (a stray comma?)`},
		{"a=5/s,,burst=1", `limit "a=5/s,,burst=1": empty option (a stray comma?)`},
		{"a=5/s,burst", `limit "a=5/s,burst": option "burst" is not NAME=VALUE`},
		{"a=5/s,burst=0", `limit "a=5/s,burst=0": burst "0" is not a whole number from 1 to 1073741824`},
		{"a=5/s,burst=-1", `limit "a=5/s,burst=-1": burst "-1" is not a whole number from 1 to 1073741824`},
		{"a=5/s,burst=+3", `limit "a=5/s,burst=+3": burst "+3" is not a whole number from 1 to 1073741824`},
		{"a=5/s,burst=1.5", `limit "a=5/s,burst=1.5": burst "1.5" is not a whole number from 1 to 1073741824`},
		{"a=5/s,burst=99999999999999999999", `limit "a=5/s,burst=99999999999999999999": burst "99999999999999999999" is not a whole number from 1 to 1073741824`},
		{"a=5/s,burst=1,burst=2", `limit "a=5/s,burst=1,burst=2": burst given twice`},
		{"a=5/s,rate=2", `limit "a=5/s,rate=2": unknown option "rate" (want name, policy, burst, slots, capacity, key, max-wait, cost, settle, global, in-flight, adapt, floor, fair, weights, priority or priority-floor)`},
		{"a=5/s,max_wait=1s", `limit "a=5/s,max_wait=1s": unknown option "max_wait" (want name, policy, burst, slots, capacity, key, max-wait, cost, settle, global, in-flight, adapt, floor, fair, weights, priority or priority-floor)`},
		{"a=5/s,key=", `limit "a=5/s,key=": key is empty (leave it out for no key)`},
		{"a=5/s,key=t:{payload.tenant", `limit "a=5/s,key=t:{payload.tenant": key template "t:{payload.tenant": unclosed '{' at byte 2`},
		{"a=5/s,key=t:}", `limit "a=5/s,key=t:}": key template "t:}": unmatched '}' at byte 2`},
		{"a=5/s,key=t:{}", `limit "a=5/s,key=t:{}": key template "t:{}": unknown placeholder {}: want {type}, {payload.<field>} or {header.<name>}`},
		{"a=5/s,key={a{b}}", `limit "a=5/s,key={a{b}}": key template "{a{b}}": unclosed '{' at byte 0`},
		{"a=5/s,key=a\tb", `limit "a=5/s,key=a\tb": key template "a\tb": control character at byte 1`},
		{"a=5/s,max-wait=soon", `limit "a=5/s,max-wait=soon": max-wait "soon" is not a duration such as 2s or 500ms`},
		{"a=5/s,max-wait=0", `limit "a=5/s,max-wait=0": max-wait 0s must be positive (leave it out for the worker's default)`},
		{"a=5/s,max-wait=-1s", `limit "a=5/s,max-wait=-1s": max-wait -1s must be positive (leave it out for the worker's default)`},
		{"a=5/s,cost=0", `limit "a=5/s,cost=0": cost "0" is not a whole number from 1 to 1073741824, nor a template such as {payload.tokens}`},
		{"a=5/s,burst=2,cost=3", `limit "a=5/s,burst=2,cost=3": cost 3 is larger than burst 2: no job could ever run`},
		{"a=5/s,cost=3,global=1/s", `limit "a=5/s,cost=3,global=1/s": cost 3 is larger than global burst 1: no job could ever run`},
		{"a=5/s,global=1/w", `limit "a=5/s,global=1/w": global: unknown unit "w" (want s, m or h)`},
		{"a=5/s,global=1/s:0", `limit "a=5/s,global=1/s:0": global burst "0" is not a whole number from 1 to 1073741824`},
		{"a=5/s,global=1/s:", `limit "a=5/s,global=1/s:": global burst "" is not a whole number from 1 to 1073741824`},
		{"a=5/s,global=9000000000/s", `limit "a=5/s,global=9000000000/s": global rate 9e+09 per 1s is faster than one token per nanosecond`},
		{"a=5/s,in-flight=0", `limit "a=5/s,in-flight=0": in-flight "0" is not a whole number from 1 to 1073741824`},
		{"a=5/s,in-flight=2000000", `limit "a=5/s,in-flight=2000000": in-flight: max 2000000 is larger than 1048576`},
		{"a\x00b=5/s", `limit "a\x00b=5/s": type "a\x00b" contains a control character`},
		{strings.Repeat("t", 257) + "=1/s", `limit "` + strings.Repeat("t", 80) + `"...: type is 257 bytes, more than 64: it names the policy in metrics and logs`},
		{"a=1/s,key=" + strings.Repeat("k", 129), `limit "a=1/s,key=` + strings.Repeat("k", 70) + `"...: key template "` + strings.Repeat("k", 129) + `": 129 bytes, more than 128`},
		// A bucket that takes longer than throttle allows to fill.
		{"a=1/h,burst=1000000000", `limit "a=1/h,burst=1000000000": rate 1 per 1h0m0s with burst 1000000000 takes longer than 27777h46m40s to fill`},
	}
	for i, tt := range tests {
		got, err := Parse(tt.in)
		require.Error(t, err, "%d: %q parsed as %+v", i, tt.in, got)
		assert.Equal(t, tt.want, err.Error(), "%d: %q", i, tt.in)
		assert.ErrorIs(t, err, ErrInvalid, "%d: %q", i, tt.in)
		assert.Equal(t, Spec{}, got, "%d: %q", i, tt.in)
	}
}

func TestDefaultBurst(t *testing.T) {
	tests := []struct {
		rate   float64
		period time.Duration
		want   int
	}{
		{50, time.Second, 50},
		{0.5, time.Second, 1},
		{1.2, time.Second, 2},
		{100, time.Minute, 2},
		{60, time.Minute, 1},
		{3600, time.Hour, 1},
		{3601, time.Hour, 2},
		{0.3 * 3, time.Second, 1}, // 0.8999999999999999: float noise must not round it to 2
		{3, 0, 3},                 // a zero period means one second, as in throttle
		{1e300, time.Second, maxCount},
	}
	for i, tt := range tests {
		assert.Equal(t, tt.want, DefaultBurst(tt.rate, tt.period), "%d: %v per %v", i, tt.rate, tt.period)
	}
}

func TestValidate(t *testing.T) {
	ok := flat{Type: "a", Limit: throttle.Limit{Rate: 10, Burst: 10}}.spec()
	require.NoError(t, ok.Validate())

	tests := []struct {
		name   string
		change func(*Spec)
		want   string
	}{
		{"empty type", func(s *Spec) { s.Name = "" }, "type is empty"},
		{"space around type", func(s *Spec) { s.Name = " a" }, `type " a" starts or ends with a space`},
		{"comma in type", func(s *Spec) { s.Name = "a,b" }, `type "a,b" must not contain '=' or ','`},
		{"zero burst", func(s *Spec) { s.Limit = throttle.Limit{Rate: 1, Burst: 0} }, "burst 0 must be at least 1"},
		{"bad global", func(s *Spec) { s.Global = throttle.Limit{Rate: -1, Burst: 1} }, "global rate -1 must be positive"},
		{"comma in key", func(s *Spec) { s.KeyTemplate = "a,b" }, `key "a,b" must not contain ','`},
		{"space around key", func(s *Spec) { s.KeyTemplate = "a " }, `key "a " starts or ends with a space`},
		{"negative max wait", func(s *Spec) { s.MaxWait = -time.Second }, "max-wait -1s must not be negative"},
		{"negative cost", func(s *Spec) { s.Cost = -1 }, "cost -1 must not be negative"},
		{"negative in-flight", func(s *Spec) { s.InFlight = -1 }, "in-flight -1 must not be negative"},
	}
	for _, tt := range tests {
		s := ok
		tt.change(&s)
		err := s.Validate()
		require.Error(t, err, tt.name)
		assert.Equal(t, tt.want, err.Error(), tt.name)
		assert.True(t, errors.Is(err, ErrInvalid), tt.name)
	}
}

func TestString(t *testing.T) {
	sp := flat{
		Type:    "email:send",
		Adapt:   true,
		Limit:   throttle.Limit{Rate: 0.5, Period: time.Minute, Burst: 1},
		Key:     "tenant:{payload.tenant}",
		MaxWait: 1500 * time.Millisecond,
		Cost:    1,
		Global:  &throttle.Limit{Rate: 100, Period: time.Hour, Burst: 10},
		Fair:    true,
	}.spec()
	assert.Equal(t, "email:send=0.5/m,burst=1,key=tenant:{payload.tenant},max-wait=1.5s,cost=1,global=100/h:10", sp.String())
	sp.InFlight = 5
	assert.Equal(t, "email:send=0.5/m,burst=1,key=tenant:{payload.tenant},max-wait=1.5s,cost=1,global=100/h:10,in-flight=5", sp.String())
	sp.Weights = map[string]int{"tenant:b": 1, "tenant:a": 3}
	assert.Equal(t, "email:send=0.5/m,burst=1,key=tenant:{payload.tenant},max-wait=1.5s,cost=1,global=100/h:10,in-flight=5,weights=tenant:a:3|tenant:b:1", sp.String())
	sp.Fair, sp.Weights, sp.Priorities = false, nil, false
	assert.Equal(t, "email:send=0.5/m,burst=1,key=tenant:{payload.tenant},max-wait=1.5s,cost=1,global=100/h:10,in-flight=5,fair=off", sp.String())
	assert.Equal(t, "a=3/s,burst=3", flat{Type: "a", Limit: throttle.Limit{Rate: 3, Burst: 3}, Adapt: true}.spec().String())
	assert.Equal(t, "a=3/s,burst=3,adapt=off", flat{Type: "a", Limit: throttle.Limit{Rate: 3, Burst: 3}}.spec().String())
	assert.Equal(t, "a=3/s,burst=3,floor=0.5/s", flat{Type: "a", Limit: throttle.Limit{Rate: 3, Burst: 3}, Adapt: true, Floor: 0.5}.spec().String())
	for _, in := range []string{
		"a=40/s,policy=sliding-log", "a=100/m,policy=fixed-window", "a=100/m,policy=sliding-window,slots=6",
		"a=50/s,policy=leaky-bucket,capacity=100", "a=40/s,policy=sliding-log,key=t:{payload.t},cost=2,global=100/s:10",
	} {
		sp, err := Parse(in)
		require.NoError(t, err, in)
		again, err := Parse(sp.String())
		require.NoError(t, err, sp.String())
		assert.Equal(t, flatOf(sp), flatOf(again), "%s round-trips through %s", in, sp.String())
	}
	assert.Equal(t, "a=100/m,policy=sliding-window,slots=10", mustParse(t, "a=100/m,policy=sliding-window")[0].String(), "the default slots spelled out")
}

func TestParseAdapt(t *testing.T) {
	sp, err := Parse("a=50/s,burst=5,adapt=off")
	require.NoError(t, err)
	assert.False(t, sp.Adapt)
	assert.Equal(t, "a=50/s,burst=5,adapt=off", sp.String())
	sp, err = Parse("a=40/s,policy=sliding-log")
	require.NoError(t, err)
	assert.False(t, sp.Adapt, "only a token bucket adapts")
	for in, want := range map[string]string{
		"a=40/s,policy=sliding-log,adapt=on": `limit "a=40/s,policy=sliding-log,adapt=on": adapt does not apply to policy sliding-log (adapt is for policy token-bucket)`,
		"a=50/s,adapt=maybe":                 `limit "a=50/s,adapt=maybe": adapt "maybe": want on, off or key`,
		"a=50/s,adapt=key":                   `limit "a=50/s,adapt=key": adapt=key needs key= and global=`,
		"a=50/s,adapt=off,floor=5/s":         `limit "a=50/s,adapt=off,floor=5/s": floor needs adapt=on (the least rate an adaptive limit falls to)`,
		"a=50/s,floor=60/s":                  `limit "a=50/s,floor=60/s": floor is above the rate: the least rate must not exceed the limit`,
		"a=50/s,floor=fast":                  `limit "a=50/s,floor=fast": `,
	} {
		_, err := Parse(in)
		require.Error(t, err, in)
		assert.ErrorIs(t, err, ErrInvalid, in)
		assert.Contains(t, err.Error(), want, in)
	}
}

// TestParseAdaptKey: with key= and global=, the global limit is the one that
// adapts (the upstream's account is shared) unless adapt=key.
func TestParseAdaptKey(t *testing.T) {
	sp, err := Parse("t=10/s,key=tenant:{payload.t},global=600/m:20,floor=60/m")
	require.NoError(t, err)
	assert.True(t, sp.Adapt)
	assert.False(t, sp.AdaptKey)
	assert.InDelta(t, 60, sp.AdaptFloor, 1e-9, "the floor, per the global limit's period")
	assert.Equal(t, "t=10/s,burst=10,key=tenant:{payload.t},global=600/m:20,floor=60/m", sp.String())

	sp, err = Parse("t=10/s,key=tenant:{payload.t},global=600/m:20,adapt=key,floor=2/s")
	require.NoError(t, err)
	assert.True(t, sp.Adapt)
	assert.True(t, sp.AdaptKey)
	assert.InDelta(t, 2, sp.AdaptFloor, 1e-9, "the floor, per the key's limit's period")
	assert.Equal(t, "t=10/s,burst=10,key=tenant:{payload.t},global=600/m:20,adapt=key,floor=2/s", sp.String())

	sp, err = Parse("t=10/s,policy=sliding-log,key=tenant:{payload.t},global=600/m:20")
	require.NoError(t, err)
	assert.True(t, sp.Adapt, "the global token bucket adapts, whatever the key's policy")

	_, err = Parse("t=10/s,key=tenant:{payload.t},global=600/m:20,floor=11/s")
	assert.ErrorContains(t, err, "floor is above the rate")
}

// TestFair: fair= and weights= in a spec, their defaults and their errors.
func TestFair(t *testing.T) {
	sp, err := Parse("t=100/s,key=tenant:{payload.t},global=50/s")
	require.NoError(t, err)
	assert.True(t, sp.Fair, "on by default with key= and global=")
	sp, err = Parse("t=100/s,key=tenant:{payload.t}")
	require.NoError(t, err)
	assert.False(t, sp.Fair, "off without global=")
	sp, err = Parse("t=100/s,key=tenant:{payload.t},global=50/s,fair=off")
	require.NoError(t, err)
	assert.False(t, sp.Fair)
	sp, err = Parse("t=100/s,key=tenant:{payload.t},global=50/s,weights=tenant:acme:3|tenant:b:2")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"tenant:acme": 3, "tenant:b": 2}, sp.Weights)
	again, err := Parse(sp.String())
	require.NoError(t, err)
	assert.Equal(t, sp.Weights, again.Weights, "weights round-trip through String")

	for in, want := range map[string]string{
		"t=100/s,fair=on":                                             "fair needs key= and global=",
		"t=100/s,key=k:{payload.t},fair=maybe":                        `fair "maybe": want on or off`,
		"t=100/s,key=k:{payload.t},global=5/s,fair=off,weights=k:a:2": "weights need fair=on",
		"t=100/s,key=k:{payload.t},global=5/s,weights=k:a":            `weight "a" is not a whole number`,
		"t=100/s,key=k:{payload.t},global=5/s,weights=3":              `weights entry "3" is not KEY:WEIGHT`,
		"t=100/s,key=k:{payload.t},global=5/s,weights=k:a:0":          `"k:a"'s weight 0 is not between 1 and 1000000`,
		"t=100/s,key=k:{payload.t},global=5/s,weights=k:a:1|k:a:2":    `key "k:a" given twice`,
	} {
		_, err := Parse(in)
		require.ErrorIs(t, err, ErrInvalid, in)
		assert.Contains(t, err.Error(), want, in)
	}
}

// A max-wait longer than MaxMaxWait is refused, in a spec and in a file.
func TestMaxWaitBound(t *testing.T) {
	_, err := Parse("sleep=1/s,max-wait=1000000h")
	require.ErrorIs(t, err, ErrInvalid)
	assert.Equal(t, `limit "sleep=1/s,max-wait=1000000h": max-wait 1000000h0m0s is longer than 24h0m0s (a job would hold a worker slot that long)`, err.Error())
	sp, err := Parse("sleep=1/s,max-wait=24h")
	require.NoError(t, err)
	assert.Equal(t, MaxMaxWait, sp.MaxWait)
	_, err = LoadFile(writeFile(t, `{"limits": [{"type": "a", "rate": "1/s", "max_wait": "25h"}]}`))
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "max-wait 25h0m0s is longer than 24h0m0s")
	assert.ErrorIs(t, flat{Type: "a", Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}, MaxWait: 25 * time.Hour}.spec().Validate(), ErrInvalid)
}
