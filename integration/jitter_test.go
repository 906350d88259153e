package integration

import (
	"testing"

	"github.com/sluicehq/sluice/internal/jitter"
)

// jitterProbe measures how late this machine runs a goroutine that asked to
// wake (see jitter.Probe). Checks on arrival times add its Worst to their
// tolerance, so that they allow for the jitter the machine showed during the
// test and nothing more; a test calls Reset when the part it measures begins.
type jitterProbe = jitter.Probe

// startJitterProbe starts a probe that runs until tb ends.
func startJitterProbe(tb testing.TB) *jitterProbe {
	p := jitter.Start()
	tb.Cleanup(p.Stop)
	return p
}
