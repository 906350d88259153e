package limitspec

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/throttle"
)

// writeFile writes content to a file in a fresh temporary directory and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "limits.json")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

func TestLoadFile(t *testing.T) {
	path := writeFile(t, `{"limits": [
		{"type": "http:request", "rate": "50/s", "burst": 5},
		{"type": "email:send", "rate": "100/m", "burst": 10, "key": "tenant:{payload.tenant}",
		 "max_wait": "2s", "cost": 1, "global": "500/s:50"},
		{"type": "report:build", "rate": "0.5/s", "global": "10/m", "in_flight": 3},
		{"type": "search", "rate": "40/s", "policy": "sliding-log"},
		{"type": "stats", "rate": "100/m", "policy": "sliding-window", "slots": 6},
		{"type": "sms", "rate": "50/s", "policy": "leaky-bucket", "capacity": 100}
	]}`)
	got, err := LoadFile(path)
	require.NoError(t, err)
	want := []flat{
		{Type: "http:request", Limit: throttle.Limit{Rate: 50, Period: time.Second, Burst: 5}},
		{
			Type:    "email:send",
			Limit:   throttle.Limit{Rate: 100, Period: time.Minute, Burst: 10},
			Key:     "tenant:{payload.tenant}",
			MaxWait: 2 * time.Second,
			Cost:    1,
			Global:  &throttle.Limit{Rate: 500, Period: time.Second, Burst: 50},
			Fair:    true,
		},
		{
			Type:     "report:build",
			Limit:    throttle.Limit{Rate: 0.5, Period: time.Second, Burst: 1},
			Global:   &throttle.Limit{Rate: 10, Period: time.Minute, Burst: 1},
			InFlight: 3,
		},
		{Type: "search", Limit: throttle.SlidingLog{Max: 40, Window: time.Second}},
		{Type: "stats", Limit: throttle.SlidingWindow{Max: 100, Window: time.Minute, Slots: 6}},
		{Type: "sms", Limit: throttle.LeakyBucket{Rate: 50, Period: time.Second, Capacity: 100}},
	}
	for i := range want[:3] {
		want[i].Adapt = true // token buckets adapt unless "adapt": false
	}
	assert.Equal(t, want, flatsOf(got))

	// A file entry and the flag spelling the same limit agree.
	for i, sp := range got {
		fromFlag, err := Parse(sp.String())
		require.NoError(t, err, "%d", i)
		assert.Equal(t, flatOf(sp), flatOf(fromFlag), "%d", i)
	}
}

func TestLoadFileEmptyList(t *testing.T) {
	got, err := LoadFile(writeFile(t, `{"limits": []}`))
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestLoadFileInvalid(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string // the message after `limits file "<path>": `
	}{
		{"empty", ``, "empty, want a JSON object"},
		{"burst for sliding-log", `{"limits": [{"type": "a", "rate": "5/s", "policy": "sliding-log", "burst": 2}]}`, `limits[0] (type "a"): burst does not apply to policy sliding-log (burst is for policy token-bucket)`},
		{"unknown policy", `{"limits": [{"type": "a", "rate": "5/s", "policy": "lru"}]}`, `limits[0] (type "a"): unknown policy "lru" (want token-bucket, fixed-window, sliding-log, sliding-window, leaky-bucket)`},
		{"zero capacity", `{"limits": [{"type": "a", "rate": "5/s", "policy": "leaky-bucket", "capacity": 0}]}`, `limits[0] (type "a"): capacity 0 must be at least 1`},
		{"no limits", `{}`, `no "limits" array, as in {"limits": [{"type": "http:request", "rate": "50/s"}]}`},
		{"null limits", `{"limits": null}`, `limits: want an array at line 1, column 12`},
		{"unknown top-level field", `{"limits": [], "limit": []}`, `unknown field "limit"`},
		{"unknown entry field", `{"limits": [{"type": "a", "rate": "1/s"}, {"type": "b", "rate": "1/s", "maxwait": "1s"}]}`, `limits[1]: unknown field "maxwait"`},
		{"syntax", "{\"limits\": [\n  {\"type\": \"a\",, }\n]}", `bad JSON at line 2, column 16: invalid character ',' looking for beginning of object key string`},
		{"truncated", `{"limits": [`, "JSON ends too soon, at line 1, column 13"},
		{"trailing text", `{"limits": []} {}`, "bad JSON at line 1, column 16: invalid character '{' after top-level value"},
		{"wrong type", `{"limits": [{"type": "a", "rate": "1/s", "burst": "5"}]}`, `limits[0]: burst: want int, got JSON string`},
		{"limits not an array", `{"limits": {}}`, `limits: want an array at line 1, column 12`},
		{"not an object", `[]`, `want a JSON object at line 1, column 1`},
		{"limits twice", `{"limits": [], "limits": []}`, `"limits" given twice in one object, at line 1, column 16`},
		{"entry not an object", `{"limits": ["a=1/s"]}`, `limits[0]: want an object such as {"type": "http:request", "rate": "50/s"}, got JSON string`},
		{"missing type", `{"limits": [{"rate": "1/s"}]}`, `limits[0]: "type" is missing or empty`},
		{"missing rate", `{"limits": [{"type": "a"}]}`, `limits[0] (type "a"): "rate" is missing or empty (want RATE/UNIT, e.g. "50/s")`},
		{"bad unit", `{"limits": [{"type": "a", "rate": "1/s"}, {"type": "email:send", "rate": "5/q"}]}`, `limits[1] (type "email:send"): unknown unit "q" (want s, m, h, day, week or month)`},
		{"zero burst", `{"limits": [{"type": "a", "rate": "1/s", "burst": 0}]}`, `limits[0] (type "a"): burst 0 must be at least 1`},
		{"zero cost", `{"limits": [{"type": "a", "rate": "1/s", "cost": 0}]}`, `limits[0] (type "a"): cost 0 must be at least 1 (leave it out for 1)`},
		{"cost over burst", `{"limits": [{"type": "a", "rate": "1/s", "cost": 2}]}`, `limits[0] (type "a"): cost 2 is larger than burst 1: no job could ever run`},
		{"bad max wait", `{"limits": [{"type": "a", "rate": "1/s", "max_wait": "2"}]}`, `limits[0] (type "a"): max-wait "2" is not a duration such as 2s or 500ms`},
		{"bad global", `{"limits": [{"type": "a", "rate": "1/s", "global": "5/s:x"}]}`, `limits[0] (type "a"): global burst "x" is not a whole number from 1 to 1073741824`},
		{"fair without global", `{"limits": [{"type": "a", "rate": "1/s", "key": "t:{payload.t}", "fair": true}]}`, `limits[0] (type "a"): fair needs key= and global= (it shares the global bucket among the keys)`},
		{"zero weight", `{"limits": [{"type": "a", "rate": "1/s", "key": "t:{payload.t}", "global": "5/s", "weights": {"t:x": 0}}]}`, `limits[0] (type "a"): weights: "t:x"'s weight 0 is not between 1 and 1000000`},
		{"zero in_flight", `{"limits": [{"type": "a", "rate": "1/s", "in_flight": 0}]}`, `limits[0] (type "a"): in_flight 0 must be at least 1 (leave it out for no bound)`},
		{"bad key", `{"limits": [{"type": "a", "rate": "1/s", "key": "t:{x"}]}`, `limits[0] (type "a"): key template "t:{x": unclosed '{' at byte 2`},
		{"long type", `{"limits": [{"type": "` + strings.Repeat("t", 300) + `", "rate": "1/s"}]}`, `limits[0] (type "` + strings.Repeat("t", 80) + `"...): type is 300 bytes, more than 64: it names the policy in metrics and logs`},
		{"duplicate type", `{"limits": [{"type": "a", "rate": "1/s"}, {"type": "b", "rate": "1/s"}, {"type": "a", "rate": "2/s"}]}`, `limits[0] and limits[2] are both for type "a"`},
	}
	for _, tt := range tests {
		path := writeFile(t, tt.content)
		got, err := LoadFile(path)
		require.Error(t, err, tt.name)
		assert.Equal(t, `limits file `+quote(path)+`: `+tt.want, err.Error(), tt.name)
		assert.ErrorIs(t, err, ErrInvalid, tt.name)
		assert.Nil(t, got, tt.name)
	}
}

func TestLoadFileTooLarge(t *testing.T) {
	path := writeFile(t, `{"limits": []}`+strings.Repeat(" ", MaxFileSize))
	_, err := LoadFile(path)
	require.Error(t, err)
	assert.Equal(t, `limits file `+quote(path)+`: larger than 1048576 bytes`, err.Error())
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestLoadFileMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.json")
	_, err := LoadFile(path)
	require.Error(t, err)
	assert.Equal(t, `limits file `+quote(path)+`: no such file or directory`, err.Error())
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotErrorIs(t, err, ErrInvalid)
}

func TestLoadFileAdapt(t *testing.T) {
	got, err := LoadFile(writeFile(t, `{"limits": [
		{"type": "a", "rate": "50/s", "adapt": false},
		{"type": "b", "rate": "50/s", "floor": "5/s"},
		{"type": "c", "rate": "40/s", "policy": "sliding-log"}
	]}`))
	require.NoError(t, err)
	assert.False(t, got[0].Adapt)
	assert.True(t, got[1].Adapt)
	assert.Equal(t, 5.0, got[1].AdaptFloor)
	assert.False(t, got[2].Adapt)
	specs, err := LoadFile(writeFile(t, `{"limits": [{"type": "k", "rate": "10/s", "key": "t:{payload.t}", "global": "50/s", "adapt": "key"}]}`))
	require.NoError(t, err)
	assert.True(t, specs[0].Adapt && specs[0].AdaptKey, `"adapt": "key"`)
	_, err = LoadFile(writeFile(t, `{"limits": [{"type": "k", "rate": "10/s", "adapt": "maybe"}]}`))
	assert.ErrorContains(t, err, `want true, false or "key"`)
	_, err = LoadFile(writeFile(t, `{"limits": [{"type": "c", "rate": "40/s", "policy": "sliding-log", "adapt": true}]}`))
	assert.ErrorContains(t, err, "adapt does not apply to policy sliding-log")
}

// TestLoadFileFair: "fair" and "weights" in a limits file.
func TestLoadFileFair(t *testing.T) {
	specs, err := LoadFile(writeFile(t, `{"limits": [
		{"type": "a", "rate": "100/s", "key": "tenant:{payload.t}", "global": "50/s", "weights": {"tenant:acme": 3}},
		{"type": "b", "rate": "100/s", "key": "tenant:{payload.t}", "global": "50/s", "fair": false}]}`))
	require.NoError(t, err)
	require.Len(t, specs, 2)
	assert.True(t, specs[0].Fair, "on by default with key and global")
	assert.Equal(t, map[string]int{"tenant:acme": 3}, specs[0].Weights)
	assert.False(t, specs[1].Fair)
}
