package workers

import (
	"strconv"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
)

// A raise of a calendar quota is looser; a re-plan brings back as many
// parked jobs as the quota grants in a window (each key's, with a key per
// tenant: up to replanScan), beyond the tickets' wave of the short limits.
func TestQuotaReplan(t *testing.T) {
	mk := func(p Policy) *policy {
		t.Helper()
		pp, err := newPolicy(p, time.Second, 10)
		require.NoError(t, err)
		return pp
	}
	day := func(n int) throttle.FixedWindow { return throttle.FixedWindow{Max: n, Calendar: "day"} }
	perSec := throttle.FixedWindow{Max: 1, Window: time.Second}
	small := mk(Policy{Name: "a", Limit: perSec, Limits: []NamedLimit{{Name: "day", Limit: day(2000)}}})
	raised := mk(Policy{Name: "a", Limit: perSec, Limits: []NamedLimit{{Name: "day", Limit: day(2500)}}})
	assert.True(t, looser(small, raised))
	assert.False(t, looser(raised, small))
	assert.Equal(t, 6, replanWave(raised), "the tickets' wave: 1 + 1/s over 5 s")
	assert.Equal(t, 2500, parkWave(raised), "the parked: what the quota grants in a window")
	assert.Equal(t, 0, parkWave(mk(Policy{Name: "a", Limit: perSec})), "no quota, none parked")
	keyed := mk(Policy{Name: "a", Limit: perSec, Limits: []NamedLimit{{Name: "day", Limit: day(20)}},
		Key: func(*asynq.Task) (string, error) { return "k", nil }})
	assert.Equal(t, replanScan, parkWave(keyed), "a quota per key: as many as a re-plan looks at")

	now := time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC)
	r, ok := raised.nextReset(now)
	require.True(t, ok)
	assert.Equal(t, time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC), r)
	// a refusal's reset is the boundary nearest to what it named
	assert.Equal(t, r, raised.resetAt(now, r.Add(-300*time.Millisecond)))
	assert.Equal(t, r.Add(24*time.Hour), raised.resetAt(now, r.Add(24*time.Hour+2*time.Second)))
}

// Two loads of one zone are two *time.Location values: a policy's
// fingerprint (which voids tickets and names a re-plan's claim across the
// fleet) and its sameness name the zone, not the pointer.
func TestQuotaFingerprint(t *testing.T) {
	load := func() *time.Location {
		loc, err := time.LoadLocation("America/Los_Angeles")
		require.NoError(t, err)
		return loc
	}
	mk := func(loc *time.Location, n int) *policy {
		pp, err := newPolicy(Policy{Name: "a", Limits: []NamedLimit{{Name: "day", Limit: throttle.FixedWindow{Max: n, Calendar: "day", Zone: loc}}}}, time.Second, 10)
		require.NoError(t, err)
		return pp
	}
	a, b := mk(load(), 5), mk(load(), 5)
	assert.Equal(t, a.fp, b.fp)
	assert.True(t, sameLimits(a, b))
	assert.NotEqual(t, a.fp, mk(load(), 6).fp)
	assert.NotEqual(t, a.fp, mk(time.UTC, 5).fp)
	assert.Equal(t, mk(nil, 5).fp, mk(time.UTC, 5).fp, "nil is UTC")
}

// A re-plan brings back a job parked for a reset still ahead, due in the
// first seconds after it, parked fewer than twice; not one sent back since
// for a reason of its own, nor one parked twice.
func TestParkedOnce(t *testing.T) {
	until := time.Now().Add(time.Hour).Truncate(time.Second)
	h := func(parks string) map[string]string {
		return map[string]string{queue.HeaderParkedUntil: strconv.FormatInt(until.UnixMicro(), 10), queue.HeaderParks: parks}
	}
	assert.True(t, parkedOnce(h("1"), until))
	assert.True(t, parkedOnce(h("1"), until.Add(10*time.Second)), "its place, up to parkSpread")
	assert.False(t, parkedOnce(h("2"), until), "parked twice")
	assert.False(t, parkedOnce(h("1"), until.Add(time.Hour)), "due later for a reason of its own")
	assert.False(t, parkedOnce(h("1"), until.Add(-time.Minute)), "due before the reset: not parked for it")
	assert.False(t, parkedOnce(map[string]string{queue.HeaderTicket: "x"}, until), "no park")
	past := map[string]string{queue.HeaderParkedUntil: strconv.FormatInt(time.Now().Add(-time.Hour).UnixMicro(), 10), queue.HeaderParks: "1"}
	assert.False(t, parkedOnce(past, time.Now().Add(time.Hour)), "a reset passed")
}
