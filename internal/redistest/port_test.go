package redistest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A second server on a port already taken must report errPortInUse, so that
// start tries another port instead of failing the test.
func TestLaunchPortInUse(t *testing.T) {
	t.Parallel()
	first := Start(t)

	bin, err := findBinary()
	require.NoError(t, err)
	second := &Server{bin: bin, dir: t.TempDir(), port: first.port}
	second.mu.Lock()
	err = second.launch()
	second.mu.Unlock()
	require.ErrorIs(t, err, errPortInUse)
	assert.Nil(t, second.proc)

	first.mu.Lock()
	pid := first.proc.cmd.Process.Pid
	first.mu.Unlock()
	assert.NoError(t, probe(first.Addr(), "", pid), "first server still answers")
}

func TestPasswordFrom(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--requirepass"}, ""},
		{[]string{"--requirepass", "x"}, "x"},
		{[]string{"--maxmemory", "1mb", "--requirepass", "x", "--requirepass", "y"}, "y"},
	} {
		assert.Equal(t, tc.want, passwordFrom(tc.args), "case %d", i)
	}
}
