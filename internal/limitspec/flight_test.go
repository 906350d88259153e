package limitspec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// in-flight=auto, auto:CEIL and auto:FLOOR-CEIL make an automatic bound,
// written back as given; with the other options of a type too.
func TestInFlightAuto(t *testing.T) {
	for _, tc := range []struct {
		in         string
		max, floor int
		out        string
	}{
		{"a=50/s,in-flight=auto", 0, 0, "a=50/s,burst=50,in-flight=auto"},
		{"a=50/s,in-flight=auto:200", 200, 0, "a=50/s,burst=50,in-flight=auto:200"},
		{"a=50/s,in-flight=auto:4-200", 200, 4, "a=50/s,burst=50,in-flight=auto:4-200"},
		{"a=50/s,in-flight=auto:7-7", 7, 7, "a=50/s,burst=50,in-flight=auto:7-7"},
	} {
		sp, err := Parse(tc.in)
		require.NoError(t, err, tc.in)
		assert.True(t, sp.InFlightAuto, tc.in)
		assert.Equal(t, tc.max, sp.InFlight, tc.in)
		assert.Equal(t, tc.floor, sp.InFlightFloor, tc.in)
		assert.Equal(t, tc.out, sp.String(), tc.in)
		again, err := Parse(sp.String())
		require.NoError(t, err)
		assert.Equal(t, sp.Policy.InFlightFloor, again.InFlightFloor)
	}

	sp, err := Parse("t=10/s,burst=10,key=tenant:{payload.t},global=100/s,in-flight=auto:2-40,floor=1/s,weights=tenant:a:3")
	require.NoError(t, err)
	assert.True(t, sp.InFlightAuto && sp.Fair && sp.Adapt, "every option together")
	assert.Equal(t, 40, sp.InFlight)
	assert.Equal(t, 2, sp.InFlightFloor)
}

func TestInFlightAutoInvalid(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{"a=5/s,in-flight=auto:", `limit "a=5/s,in-flight=auto:": in-flight "auto:": want N, auto, auto:CEIL or auto:FLOOR-CEIL`},
		{"a=5/s,in-flight=automatic", `limit "a=5/s,in-flight=automatic": in-flight "automatic": want N, auto, auto:CEIL or auto:FLOOR-CEIL`},
		{"a=5/s,in-flight=auto:9-3", `limit "a=5/s,in-flight=auto:9-3": in-flight "auto:9-3": the floor 9 is above the ceiling 3`},
		{"a=5/s,in-flight=auto:0", `limit "a=5/s,in-flight=auto:0": in-flight ceiling "0" is not a whole number from 1 to 1073741824`},
		{"a=5/s,in-flight=auto:x-3", `limit "a=5/s,in-flight=auto:x-3": in-flight floor "x" is not a whole number from 1 to 1073741824`},
		{"a=5/s,in-flight=auto:2000000", `limit "a=5/s,in-flight=auto:2000000": in-flight: max 2000000 is larger than 1048576`},
	} {
		_, err := Parse(tc.in)
		require.Error(t, err, tc.in)
		assert.Equal(t, tc.err, err.Error(), tc.in)
	}
}

// A limits file's "in_flight" takes a number or the same strings, in JSON
// and YAML, and agrees with the flag.
func TestInFlightAutoFile(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "limits.json")
	require.NoError(t, os.WriteFile(js, []byte(`{"limits": [
		{"type": "a", "rate": "50/s", "in_flight": "auto:3-60"},
		{"type": "b", "rate": "50/s", "in_flight": "auto"},
		{"type": "c", "rate": "50/s", "in_flight": 4}
	]}`), 0o600))
	yml := filepath.Join(dir, "limits.yaml")
	require.NoError(t, os.WriteFile(yml, []byte("limits:\n  - type: a\n    rate: 50/s\n    in_flight: auto:3-60\n"), 0o600))
	got, err := LoadFile(js)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, [3]any{true, 60, 3}, [3]any{got[0].InFlightAuto, got[0].InFlight, got[0].InFlightFloor})
	assert.Equal(t, [3]any{true, 0, 0}, [3]any{got[1].InFlightAuto, got[1].InFlight, got[1].InFlightFloor})
	assert.Equal(t, [3]any{false, 4, 0}, [3]any{got[2].InFlightAuto, got[2].InFlight, got[2].InFlightFloor})
	flag, err := Parse("a=50/s,in-flight=auto:3-60")
	require.NoError(t, err)
	assert.Equal(t, flag.String(), got[0].String())
	fromYAML, err := LoadFile(yml)
	require.NoError(t, err)
	assert.Equal(t, got[0].String(), fromYAML[0].String())

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"limits": [{"type": "a", "rate": "5/s", "in_flight": "fast"}]}`), 0o600))
	_, err = LoadFile(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"in_flight" "fast": want a number, "auto", "auto:CEIL" or "auto:FLOOR-CEIL"`)
}
