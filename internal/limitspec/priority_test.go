package limitspec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPriority: priority= and priority-floor= in a spec, their defaults,
// their round trip through String (as `sluice set` stores a spec) and
// their errors.
func TestPriority(t *testing.T) {
	for in, want := range map[string]struct {
		on    bool
		floor float64
	}{
		"t=100/s":                                            {false, 0},
		"t=100/s,priority=on":                                {true, 0},
		"t=100/s,priority-floor=10":                          {true, 0.1},
		"t=100/s,priority=on,priority-floor=2.5%":            {true, 0.025},
		"t=100/s,key=k:{payload.t},global=50/s":              {true, 0},
		"t=100/s,key=k:{payload.t},global=50/s,priority=off": {false, 0},
		"t=100/s,key=k:{payload.t},global=50/s,fair=off":     {false, 0},
		"t=100/s,key=k:{payload.t},global=50/s,fair=off,priority=on,priority-floor=20": {true, 0.2},
	} {
		sp, err := Parse(in)
		require.NoError(t, err, in)
		assert.Equal(t, want.on, sp.Priorities, in)
		assert.InDelta(t, want.floor, sp.PriorityFloor, 1e-12, in)
		again, err := Parse(sp.String())
		require.NoError(t, err, "%s: %s", in, sp.String())
		assert.Equal(t, sp.Priorities, again.Priorities, "%s round-trips through %s", in, sp.String())
		assert.Equal(t, sp.PriorityFloor, again.PriorityFloor, "%s round-trips through %s", in, sp.String())
	}
	for in, want := range map[string]string{
		"t=100/s,priority=maybe":                 `priority "maybe": want on or off`,
		"t=100/s,priority-floor=0":               `priority-floor "0" is not a percentage from 0.1 to 50`,
		"t=100/s,priority-floor=60":              `priority-floor "60" is not a percentage from 0.1 to 50`,
		"t=100/s,priority-floor=five":            `priority-floor "five" is not a percentage`,
		"t=100/s,priority=off,priority-floor=10": "priority-floor needs priority=on",
	} {
		_, err := Parse(in)
		require.ErrorIs(t, err, ErrInvalid, in)
		assert.Contains(t, err.Error(), want, in)
	}
}

// TestLoadFilePriority: "priority" and "priority_floor" in a limits file.
func TestLoadFilePriority(t *testing.T) {
	specs, err := LoadFile(writeFile(t, `{"limits": [
		{"type": "a", "rate": "40/s", "priority": true},
		{"type": "b", "rate": "40/s", "priority_floor": 10},
		{"type": "c", "rate": "100/s", "key": "tenant:{payload.t}", "global": "50/s", "priority": false},
		{"type": "d", "rate": "40/s"}]}`))
	require.NoError(t, err)
	require.Len(t, specs, 4)
	assert.True(t, specs[0].Priorities)
	assert.Zero(t, specs[0].PriorityFloor)
	assert.True(t, specs[1].Priorities, "a floor turns priorities on")
	assert.InDelta(t, 0.1, specs[1].PriorityFloor, 1e-12)
	assert.False(t, specs[2].Priorities, "off, though fair")
	assert.False(t, specs[3].Priorities, "off by default on a plain limit")

	_, err = LoadFile(writeFile(t, `{"limits": [{"type": "a", "rate": "40/s", "priority_floor": 70}]}`))
	assert.ErrorContains(t, err, `priority-floor "70" is not a percentage from 0.1 to 50`)
}

// The same fields in a YAML limits file.
func TestLoadFilePriorityYAML(t *testing.T) {
	specs, err := LoadFile(writeNamed(t, "limits.yaml", "limits:\n  - {type: a, rate: 40/s, priority: true, priority_floor: 2.5}\n"))
	require.NoError(t, err)
	require.Len(t, specs, 1)
	assert.True(t, specs[0].Priorities)
	assert.InDelta(t, 0.025, specs[0].PriorityFloor, 1e-12)
}
