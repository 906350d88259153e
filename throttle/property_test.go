package throttle

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Random calls on a token bucket agree on the memory store, a real
// redis-server and miniredis (see runRandom), with cancels in any order, and
// the grants that stand keep the token bucket's promise: in any span from
// a to b, at most Burst + ⌊(b−a)/T⌋ tokens.
func TestLimitRandomAgreesAndHolds(t *testing.T) {
	limits := []Limit{{Rate: 10, Burst: 5}, {Rate: 3, Burst: 2}, {Rate: 7, Period: time.Minute, Burst: 9}, {Rate: 1000, Burst: 1}}
	for seed := uint64(1); seed <= 24; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			l := limits[int(seed)%len(limits)]
			checkTokenBucket(t, l, grantTimes(runRandom(t, l, seed, l.pace().ceil(), true, nil)))
		})
	}
}

// Random calls agree with keys expiring by their TTLs, down to T of 1 µs.
func TestLimitRandomExpiry(t *testing.T) {
	limits := []Limit{{Rate: 1e6, Burst: 3}, {Rate: 1000, Burst: 2}, {Rate: 3, Burst: 4}}
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			l := limits[int(seed)%len(limits)]
			checkTokenBucket(t, l, grantTimes(runRandom(t, l, seed, l.pace().times(int64(l.Burst)).ceil(), true, nil)))
		})
	}
}

// checkTokenBucket requires sorted unit grant times to keep l's promise.
// A slot is the instant the bucket booked rounded up to a whole µs, so the
// tokens in slots a..b were booked in a span of (b − a + 1) µs less a
// picosecond: at most Burst + that/T of them (for a whole T, the same as
// Burst + (b − a)/T).
func checkTokenBucket(t *testing.T, l Limit, times []int64) {
	t.Helper()
	require.True(t, sort.SliceIsSorted(times, func(i, j int) bool { return times[i] < times[j] }))
	T, burst := l.pace(), int64(l.Burst)
	// The tokens by slot: slots[i] with upto[i] tokens at or before it.
	var slots, upto []int64
	for i, x := range times {
		if i == 0 || x != times[i-1] {
			slots, upto = append(slots, x), append(upto, 0)
		}
		upto[len(upto)-1] = int64(i + 1)
	}
	for i := range slots {
		for j := i; j < len(slots); j++ {
			n := upto[j]
			if i > 0 {
				n -= upto[i-1]
			}
			allowed := burst + floorDivPico(whole(slots[j]-slots[i]+1).sub(pico{ps: 1}), T)
			require.LessOrEqual(t, n, allowed, "%d tokens in [%d, %d] µs, more than burst + span/T", n, slots[i], slots[j])
		}
	}
}
