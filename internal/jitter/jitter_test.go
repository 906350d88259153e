package jitter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The probe keeps a second's worst lateness; Reset forgets what came before
// for Worst, not for WorstIn.
func TestProbe(t *testing.T) {
	p := Start()
	defer p.Stop()
	time.Sleep(50 * time.Millisecond)
	p.mu.Lock()
	p.worst[0] = 30 * time.Millisecond // as a loaded machine would have made it
	p.mu.Unlock()
	assert.Equal(t, 30*time.Millisecond, p.Worst())
	assert.Equal(t, 30*time.Millisecond, p.WorstIn(p.start, time.Now()))
	assert.Equal(t, time.Duration(0), p.WorstIn(p.start.Add(-3*time.Second), p.start.Add(-2*time.Second)), "before the probe")
	p.Reset()
	assert.Less(t, p.Worst(), 30*time.Millisecond, "after Reset")
	var none *Probe
	assert.Equal(t, time.Duration(0), none.Worst())
}
