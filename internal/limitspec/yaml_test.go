package limitspec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeNamed(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

// A YAML file reads as the JSON file of the same schema.
func TestLoadFileYAML(t *testing.T) {
	json, err := LoadFile(writeFile(t, `{"limits": [
		{"type": "http:request", "rate": "50/s", "burst": 5},
		{"type": "email:send", "rate": "100/m", "burst": 10, "key": "tenant:{payload.tenant}",
		 "max_wait": "2s", "cost": 1, "global": "500/s:50", "in_flight": 5},
		{"type": "search", "rate": "40/s", "policy": "sliding-log"}
	]}`))
	require.NoError(t, err)
	for _, name := range []string{"limits.yaml", "limits.YML"} {
		got, err := LoadFile(writeNamed(t, name, `# the fleet's limits
limits:
  - type: http:request
    rate: 50/s
    burst: 5
  - type: email:send
    rate: 100/m
    burst: 10
    key: tenant:{payload.tenant}
    max_wait: 2s
    cost: 1
    global: 500/s:50
    in_flight: 5
  - {type: search, rate: 40/s, policy: sliding-log}
`))
		require.NoError(t, err, name)
		assert.Equal(t, flatsOf(json), flatsOf(got), name)
	}
}

func TestLoadFileYAMLInvalid(t *testing.T) {
	cases := []struct{ content, want string }{
		{"limits:\n  - type: a\n   rate: 5/s\n", `bad YAML: line 1: did not find expected '-' indicator`},
		{"", `empty YAML document: want a mapping with "limits"`},
		{"limits:\n  - {type: a, rate: 5/s, type: b}\n", `bad YAML: `},
		{"limits:\n  - {1: a}\n", `YAML key 1 is not a string`},
		{"limits:\n  - {type: a, rate: 5/s, bursts: 3}\n", `limits[0]: unknown field "bursts"`},
		{"limits:\n  - {type: a, rate: 5/s, burst: 0}\n", `limits[0] (type "a"): burst 0 must be at least 1`},
		{"rules: []\n", `unknown field "rules"`},
		{"limits:\n  - {type: a, rate: 5/s, burst: lots}\n", `limits[0]`},
	}
	for _, c := range cases {
		path := writeNamed(t, "limits.yaml", c.content)
		_, err := LoadFile(path)
		require.Error(t, err, "%q", c.content)
		assert.ErrorIs(t, err, ErrInvalid, "%q", c.content)
		assert.Contains(t, err.Error(), c.want, "%q", c.content)
		assert.Contains(t, err.Error(), path, "%q", c.content)
	}
}
