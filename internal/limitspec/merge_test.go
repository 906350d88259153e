package limitspec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/throttle"
)

func mustParse(t *testing.T, specs ...string) []Spec {
	t.Helper()
	out := make([]Spec, len(specs))
	for i, s := range specs {
		var err error
		out[i], err = Parse(s)
		require.NoError(t, err)
	}
	return out
}

func TestMerge(t *testing.T) {
	file := mustParse(t, "a=1/s", "b=2/s,key=t:{payload.t},global=10/s,weights=t:x:2", "c=3/s")
	flags := mustParse(t, "d=4/s", "b=20/m,key=k")

	got, err := Merge(file, flags)
	require.NoError(t, err)
	assert.Equal(t, flatsOf(mustParse(t, "a=1/s", "b=20/m,key=k", "c=3/s", "d=4/s")), flatsOf(got))

	// The result shares nothing with the inputs.
	got[1].KeyTemplate = "changed"
	assert.Equal(t, "k", flags[1].KeyTemplate)
	got, err = Merge(file, nil)
	require.NoError(t, err)
	got[1].Weights["t:x"] = 99
	assert.Equal(t, 2, file[1].Weights["t:x"])
}

func TestMergeEmpty(t *testing.T) {
	got, err := Merge(nil, nil)
	require.NoError(t, err)
	assert.Empty(t, got)

	got, err = Merge(nil, mustParse(t, "a=1/s"))
	require.NoError(t, err)
	assert.Equal(t, flatsOf(mustParse(t, "a=1/s")), flatsOf(got))
}

func TestMergeInvalid(t *testing.T) {
	bad := mustParse(t, "a=1/s")[0]
	bad.Limit = throttle.Limit{Rate: 1, Burst: 0}
	tests := []struct {
		name        string
		file, flags []Spec
		want        string
	}{
		{"duplicate flags", nil, mustParse(t, "a=1/s", "b=1/s", "a=2/s"), `--limit given twice for type "a" (flags 1 and 3)`},
		{"duplicate file entries", mustParse(t, "a=1/s", "a=2/s"), nil, `limits file has two entries for type "a"`},
		{"invalid flag", nil, []Spec{bad}, `--limit "a": burst 0 must be at least 1`},
		{"invalid file entry", []Spec{bad}, nil, `limits file entry for "a": burst 0 must be at least 1`},
	}
	for _, tt := range tests {
		got, err := Merge(tt.file, tt.flags)
		require.Error(t, err, tt.name)
		assert.Equal(t, tt.want, err.Error(), tt.name)
		assert.ErrorIs(t, err, ErrInvalid, tt.name)
		assert.Nil(t, got, tt.name)
	}
}
