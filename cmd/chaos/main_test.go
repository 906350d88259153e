package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/cli"
)

func TestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, cli.ExitOK, run([]string{"--help"}, &out, &errOut))
	for _, k := range allFaults {
		assert.Contains(t, out.String(), "\n  "+string(k)+" ", "--help explains the fault %s", k)
	}
	assert.Contains(t, out.String(), "--seed N")
	assert.Empty(t, errOut.String())
}

func TestBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--seed", "x"}, `--seed "x": want a whole number`},
		{[]string{"--seed", "-1"}, `--seed "-1"`},
		{[]string{"--duration", "5s"}, "--duration 5s: want 10s to 24h"},
		{[]string{"--workers", "1"}, "--workers 1: want 2 to 16"},
		{[]string{"--rate", "0"}, "--rate 0: want 1 to 1000"},
		{[]string{"--prefetch", "300"}, "--prefetch 300: want 0 to 255"},
		{[]string{"--faults", "kill,nuke"}, `unknown fault "nuke" (known: kill,pause,`},
		{[]string{"--fault-gap", "1ms"}, "--fault-gap 1ms: want 100ms to 1h"},
		{[]string{"--nope"}, "flag provided but not defined: -nope"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, cli.ExitUsage, run(c.args, &out, &errOut), "%v", c.args)
		assert.Contains(t, errOut.String(), c.want, "%v", c.args)
		assert.Contains(t, errOut.String(), "Run 'chaos --help' for usage.", "%v", c.args)
	}
}

func TestFlagsDefaults(t *testing.T) {
	cfg, err := parseFlags([]string{"--seed", "9", "--duration", "10m", "--faults", "kill,restart"})
	require.NoError(t, err)
	assert.Equal(t, uint64(9), cfg.seed)
	assert.Equal(t, 10*time.Minute, cfg.duration)
	assert.Equal(t, 2*time.Minute, cfg.drain)
	assert.Equal(t, []faultKind{faultKill, faultRestart}, cfg.faults)
	assert.Equal(t, 4, cfg.workers)
}
