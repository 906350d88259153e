package limitspec

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// settle= on a named limit of http:request makes its SettleFrom, which
// reads the answer; Flags writes it back, and the limits file says the same
// with "settle" in the limit's entry.
func TestParseAllSettle(t *testing.T) {
	specs, err := ParseAll([]string{
		"http:request=3000/m,name=requests",
		"http:request=90000/m,name=tokens,burst=20000,cost={body.max_tokens},settle={answer.usage.total_tokens}",
	})
	require.NoError(t, err)
	require.Len(t, specs, 1)
	sp := specs[0]
	assert.Equal(t, flat{
		Type: "http:request", Adapt: true,
		Named: []workers.NamedLimit{
			{Name: "requests", Limit: throttle.Limit{Rate: 3000, Period: time.Minute, Burst: 50}},
			{Name: "tokens", Limit: throttle.Limit{Rate: 90000, Period: time.Minute, Burst: 20000}},
		},
		Costs:   map[string]string{"tokens": "{body.max_tokens}"},
		Settles: map[string]string{"tokens": "{answer.usage.total_tokens}"},
	}, flatOf(sp))
	assert.Nil(t, sp.Limits[0].SettleFrom)
	require.NotNil(t, sp.Limits[1].SettleFrom, "a settle template makes a SettleFrom")
	n, err := sp.Limits[1].SettleFrom(nil, []byte(`{"usage": {"total_tokens": 87}}`))
	require.NoError(t, err)
	assert.Equal(t, 87, n)
	assert.Equal(t, []string{
		"http:request=3000/m,burst=50,name=requests",
		"http:request=90000/m,burst=20000,name=tokens,cost={body.max_tokens},settle={answer.usage.total_tokens}",
	}, sp.Flags())
	again, err := ParseAll(sp.Flags())
	require.NoError(t, err)
	assert.Equal(t, flatOf(sp), flatOf(again[0]))

	// A header works too.
	specs, err = ParseAll([]string{"http:request=10/s,name=tokens,settle={answer-header.x-tokens-used}"})
	require.NoError(t, err)
	n, err = specs[0].Limits[0].SettleFrom(http.Header{"X-Tokens-Used": {"5"}}, nil)
	require.NoError(t, err)
	assert.Equal(t, 5, n)

	dir := t.TempDir()
	path := filepath.Join(dir, "limits.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`limits:
  - type: http:request
    limits:
      - {name: requests, rate: 3000/m}
      - {name: tokens, rate: 90000/m, burst: 20000, cost: "{body.max_tokens}", settle: "{answer.usage.total_tokens}"}
`), 0o600))
	got, err := LoadFile(path)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, flatOf(sp), flatOf(got[0]))
	require.NotNil(t, got[0].Limits[1].SettleFrom)
}

// settle= is checked in one place, with an error that says what is wrong.
func TestParseAllSettleInvalid(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{[]string{"http:request=5/s,settle={answer.usage.total_tokens}"},
			`limit "http:request=5/s,settle={answer.usage.total_tokens}": settle "{answer.usage.total_tokens}" is for a named limit (give the limit a name=, e.g. name=tokens)`},
		{[]string{"a=5/s,name=t,settle={answer.usage.total_tokens}"},
			`limit "a=5/s,name=t,settle={answer.usage.total_tokens}": limit "t": settle "{answer.usage.total_tokens}" is for type http:request, whose job reads an answer`},
		{[]string{"http:request=5/s,name=t,settle="}, `limit "http:request=5/s,name=t,settle=": settle is empty (leave it out to keep the cost charged)`},
		{[]string{"http:request=5/s,name=t,settle={body.usage}"},
			`limit "http:request=5/s,name=t,settle={body.usage}": limit "t": settle template "{body.usage}": unknown placeholder {body.usage}: want one placeholder: {answer.<path>} or {answer-header.<name>}`},
		{[]string{"http:request=5/s,name=t,settle={answer.usage..n}"},
			`limit "http:request=5/s,name=t,settle={answer.usage..n}": limit "t": settle template "{answer.usage..n}": placeholder {answer.usage..n}: an empty field in its path`},
		{[]string{"http:request=5/s,name=t,settle=12"},
			`limit "http:request=5/s,name=t,settle=12": limit "t": settle template "12": want one placeholder: {answer.<path>} or {answer-header.<name>}`},
	}
	for i, tt := range tests {
		_, err := ParseAll(tt.in)
		require.Error(t, err, "%d: %q", i, tt.in)
		assert.Equal(t, tt.want, err.Error(), "%d: %q", i, tt.in)
		assert.True(t, errors.Is(err, ErrInvalid), "%d", i)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "limits.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"limits": [{"type": "http:request", "rate": "5/s", "settle": "{answer.usage.n}"}]}`), 0o600))
	_, err := LoadFile(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `settle "{answer.usage.n}" is for a named limit`)
	require.NoError(t, os.WriteFile(path, []byte(`{"limits": [{"type": "http:request", "settle": "{answer.usage.n}", "limits": [{"name": "t", "rate": "5/s"}]}]}`), 0o600))
	_, err = LoadFile(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `settle goes with a named limit, in "limits"`)
}
