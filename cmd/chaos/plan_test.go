package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPlanIsTheSeeds(t *testing.T) {
	a := planFaults(42, 10*time.Minute, 4, allFaults, 4*time.Second)
	b := planFaults(42, 10*time.Minute, 4, allFaults, 4*time.Second)
	c := planFaults(43, 10*time.Minute, 4, allFaults, 4*time.Second)
	require.NotEmpty(t, a)
	assert.Equal(t, a, b, "the same seed, the same schedule")
	assert.NotEqual(t, a, c, "another seed, another schedule")

	seen := make(map[faultKind]bool)
	for _, f := range a {
		seen[f.Kind] = true
	}
	for _, k := range allFaults {
		assert.True(t, seen[k], "a 10-minute run draws every kind of fault: %s missing", k)
	}
}

func TestPlanKeepsFaultsApart(t *testing.T) {
	for seed := range uint64(20) {
		plan := planFaults(seed, 5*time.Minute, 3, allFaults, time.Second)
		busy := make(map[string]time.Duration)
		down := make(map[int]time.Duration)
		for i, f := range plan {
			assert.GreaterOrEqual(t, f.At, planWarmup, "seed %d fault %d", seed, i)
			assert.Less(t, f.At, 5*time.Minute-planQuiet, "seed %d fault %d", seed, i)
			if i > 0 {
				assert.Greater(t, f.At, plan[i-1].At, "seed %d fault %d: in order", seed, i)
			}
			if f.Kind == faultKill {
				assert.LessOrEqual(t, down[f.Worker], f.At, "seed %d fault %d: worker%d killed while down", seed, i, f.Worker+1)
				down[f.Worker] = f.At + f.For + time.Second
				stillUp := 0
				for w := range 3 {
					if down[w] <= f.At {
						stillUp++
					}
				}
				assert.GreaterOrEqual(t, stillUp, 1, "seed %d fault %d: a worker stays up", seed, i)
				continue
			}
			res := f.Kind.resource()
			assert.LessOrEqual(t, busy[res], f.At, "seed %d fault %d: %s overlaps the previous fault on %s", seed, i, f, res)
			busy[res] = f.At + f.For + time.Second
		}
	}
}

func TestPlanOnlyTheKindsAsked(t *testing.T) {
	plan := planFaults(1, 5*time.Minute, 4, []faultKind{faultKill, faultFlush}, time.Second)
	require.NotEmpty(t, plan)
	for _, f := range plan {
		assert.Contains(t, []faultKind{faultKill, faultFlush}, f.Kind)
	}
	assert.Empty(t, planFaults(1, 5*time.Minute, 4, nil, time.Second), "--faults none")
}

func TestWorkloadIsTheSeeds(t *testing.T) {
	a, b := newWorkload(5, 30), newWorkload(5, 30)
	total := 0
	for range 600 { // a minute
		na, nb := a.next(), b.next()
		require.Equal(t, na, nb)
		for _, n := range na {
			total += n
		}
	}
	assert.GreaterOrEqual(t, total, 1800, "30 jobs/s for a minute, plus bursts")
	assert.Less(t, total, 1800+6*150, "a few bursts at most")
}

func TestKindsOf(t *testing.T) {
	ks, err := kindsOf("kill, flush,kill")
	require.NoError(t, err)
	assert.Equal(t, []faultKind{faultKill, faultFlush}, ks)
	ks, err = kindsOf("all")
	require.NoError(t, err)
	assert.Equal(t, allFaults, ks)
	_, err = kindsOf("kill,explode")
	assert.ErrorContains(t, err, `unknown fault "explode"`)
}

func TestSpecsParse(t *testing.T) {
	for _, spec := range []string{baseSpec, lowSpec, highSpec} {
		b, err := boundsOf(spec)
		require.NoError(t, err, spec)
		assert.Equal(t, 4, b.inFlight, spec)
		assert.Equal(t, 500*time.Millisecond, b.maxWait, spec)
	}
	base, _ := boundsOf(baseSpec)
	assert.Equal(t, rateBurst{Rate: 60, Burst: 6}, base.global)
	assert.Equal(t, rateBurst{Rate: 100, Burst: 10}, base.tenant)
}
