package cli

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newTestFlags is the flags of a command like worker's: --redis (with
// REDIS_URL as its fallback), --limiter-redis, --concurrency and --limit.
func newTestFlags() (*Flags, *string, *string, *int, *many) {
	f := NewFlags("t")
	redisURL := f.String("redis", "", "")
	limiter := f.String("limiter-redis", "", "")
	concurrency := f.Int("concurrency", 10, "")
	var limits many
	f.Var(&limits, "limit", "")
	f.Fallback("redis", "REDIS_URL")
	return f, redisURL, limiter, concurrency, &limits
}

func TestFlagsParse(t *testing.T) {
	t.Setenv("SLUICE_LIMITER_REDIS", "redis://env:6379/1")
	t.Setenv("SLUICE_LIMIT", "a=1/s;b=2/s")
	t.Setenv("SLUICE_CONCURRENCY", "")
	t.Setenv("REDIS_URL", "redis://fallback:6379/0")
	f, redisURL, limiter, concurrency, limits := newTestFlags()
	require.NoError(t, f.Parse([]string{"--concurrency", "3"}))
	assert.Equal(t, "redis://fallback:6379/0", *redisURL, "neither flag nor SLUICE_REDIS: the fallback")
	assert.Equal(t, "redis://env:6379/1", *limiter)
	assert.Equal(t, 3, *concurrency)
	assert.Equal(t, many{"a=1/s", "b=2/s"}, *limits)
	assert.True(t, f.Given("redis"), "set by its fallback")
	assert.True(t, f.Given("concurrency"))
	assert.False(t, f.Given("version"))
	assert.NoError(t, f.NoArgs())

	// The flag wins over its variable, which wins over the fallback.
	t.Setenv("SLUICE_REDIS", "redis://env:6379/0")
	f, redisURL, _, _, _ = newTestFlags()
	require.NoError(t, f.Parse(nil))
	assert.Equal(t, "redis://env:6379/0", *redisURL)
	f, redisURL, _, _, _ = newTestFlags()
	require.NoError(t, f.Parse([]string{"--redis", "redis://flag:6379/0"}))
	assert.Equal(t, "redis://flag:6379/0", *redisURL)
}

func TestFlagsHelpVersionAndErrors(t *testing.T) {
	t.Setenv("SLUICE_CONCURRENCY", "lots") // read only once --help and --version are ruled out
	for _, args := range [][]string{{"--help"}, {"-h"}, {"--concurrency", "2", "--help"}} {
		f, _, _, _, _ := newTestFlags()
		assert.ErrorIs(t, f.Parse(args), flag.ErrHelp, "%v", args)
	}
	f, _, _, _, _ := newTestFlags()
	assert.ErrorIs(t, f.Parse([]string{"--version"}), ErrVersion)

	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--colour", "blue"}, "flag provided but not defined: -colour"},
		{[]string{"--concurrency", "many"}, `invalid value "many" for flag -concurrency: parse error`},
		{nil, `SLUICE_CONCURRENCY="lots": parse error`},
	}
	for _, tt := range tests {
		f, _, _, _, _ := newTestFlags()
		err := f.Parse(tt.args)
		require.Error(t, err, "%v", tt.args)
		assert.ErrorIs(t, err, ErrUsage, "%v", tt.args)
		assert.Equal(t, tt.want, err.Error(), "%v", tt.args)
	}

	f, _, _, _, _ = newTestFlags()
	require.NoError(t, f.ParseArgs([]string{"--concurrency", "2", "extra"}))
	err := f.NoArgs()
	assert.ErrorIs(t, err, ErrUsage)
	assert.EqualError(t, err, `unexpected argument "extra" (every option is a --flag)`)
}

// A command with flags among its arguments parses each run of them, then
// finishes once; with NoEnv the environment is not read.
func TestFlagsParseArgsAndNoEnv(t *testing.T) {
	t.Setenv("SLUICE_WAIT", "3s")
	f := NewFlags("t")
	wait := f.Duration("wait", time.Second, "")
	asJSON := f.Bool("json", false, "")
	var pos []string
	for rest := []string{"inspect", "--json", "KEY"}; ; {
		require.NoError(t, f.ParseArgs(rest))
		if f.NArg() == 0 {
			break
		}
		pos = append(pos, f.Arg(0))
		rest = f.Args()[1:]
	}
	require.NoError(t, f.Finish())
	assert.Equal(t, []string{"inspect", "KEY"}, pos)
	assert.True(t, *asJSON)
	assert.Equal(t, 3*time.Second, *wait)

	f = NewFlags("t")
	f.NoEnv = true
	wait = f.Duration("wait", time.Second, "")
	require.NoError(t, f.Parse(nil))
	assert.Equal(t, time.Second, *wait, "NoEnv: SLUICE_WAIT unread")
}
