package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func noLateness(_, _ time.Time) time.Duration { return 0 }

// evenly returns n arrivals every gap from start.
func evenly(start time.Time, n int, gap time.Duration) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = start.Add(time.Duration(i) * gap)
	}
	return out
}

func TestCheckGrantsConforming(t *testing.T) {
	ps := []phase{{Limit: rateBurst{Rate: 10, Burst: 2}}}
	// A burst of 2 at once, then one every 100 ms: exactly the bucket.
	arr := append([]time.Time{at(0)}, evenly(at(0), 50, 100*time.Millisecond)...)
	g := checkGrants("b", arr, ps, noLateness)
	assert.Equal(t, 0, g.Over)
	assert.InDelta(t, 0, g.Worst.Excess, 1e-9, "the bucket is used to the last token")
	assert.Equal(t, 51, g.Arrivals)
}

func TestCheckGrantsOver(t *testing.T) {
	ps := []phase{{Limit: rateBurst{Rate: 10, Burst: 2}}}
	// 20/s for 2 s against 10/s: 10 tokens beyond by the end.
	g := checkGrants("b", evenly(at(0), 40, 50*time.Millisecond), ps, noLateness)
	assert.Positive(t, g.Over)
	assert.InDelta(t, 40-2-10*1.95, g.Worst.Excess, 0.01)
	assert.Equal(t, at(0).Add(39*50*time.Millisecond), g.Worst.At)
}

func TestCheckGrantsAllowance(t *testing.T) {
	ps := []phase{{Limit: rateBurst{Rate: 10, Burst: 1}}}
	// The third request comes 5 ms early: 0.05 tokens, inside the 30 ms
	// (0.3 token) allowance; 50 ms of lateness seen near it lifts it further.
	arr := []time.Time{at(0), at(100), at(195)}
	assert.Equal(t, 0, checkGrants("b", arr, ps, noLateness).Over)
	arr = []time.Time{at(0), at(100), at(140)}
	assert.Equal(t, 1, checkGrants("b", arr, ps, noLateness).Over, "60 ms early is beyond 30 ms")
	late := func(_, _ time.Time) time.Duration { return 50 * time.Millisecond }
	assert.Equal(t, 0, checkGrants("b", arr, ps, late).Over, "unless the machine was that late then")
}

func TestCheckGrantsFollowsLimitChanges(t *testing.T) {
	base := bounds{global: rateBurst{Rate: 60, Burst: 6}, maxWait: 500 * time.Millisecond}
	low := bounds{global: rateBurst{Rate: 20, Burst: 2}, maxWait: 500 * time.Millisecond}
	changes := []limitChange{
		{Start: at(10_000), End: at(10_050), Bounds: low},
		{Start: at(20_000), End: at(20_050), Bounds: base},
	}
	ps := phasesOf(base, changes, nil, func(b bounds) rateBurst { return b.global })
	require.Len(t, ps, 3)
	assert.Equal(t, at(10_050).Add(applyLag+500*time.Millisecond), ps[0].To, "the old limit holds until a second plus max-wait after the set")

	// 60/s throughout: fine until the lowered limit is in force alone.
	arr := evenly(at(0), 60*30, time.Second/60)
	g := checkGrants("global", arr, ps, noLateness)
	require.Positive(t, g.Over)
	assert.True(t, g.First.At.After(ps[0].To), "first over-grant %v after the old limit ended %v", g.First.At, ps[0].To)
	assert.Equal(t, rateBurst{Rate: 20, Burst: 2}, g.First.Limit)

	// 20/s while it is lowered, 60/s otherwise: fine.
	var ok []time.Time
	for _, a := range arr {
		if a.Before(at(11_550)) || !a.Before(at(20_000)) || a.Sub(at(0))%(time.Second/20) < time.Second/60 {
			ok = append(ok, a)
		}
	}
	assert.Equal(t, 0, checkGrants("global", ok, ps, noLateness).Over)

	// A lost pub/sub message near the change: the old limit holds for the poll.
	ps = phasesOf(base, changes, []time.Time{at(9_000)}, func(b bounds) rateBurst { return b.global })
	assert.Equal(t, at(10_050).Add(pollLag+500*time.Millisecond), ps[0].To)
}

func TestCheckGrantsFailedChange(t *testing.T) {
	base := bounds{global: rateBurst{Rate: 60, Burst: 6}}
	low := bounds{global: rateBurst{Rate: 20, Burst: 2}}
	ps := phasesOf(base, []limitChange{{Start: at(0), End: at(50), Bounds: low, Failed: true}}, nil,
		func(b bounds) rateBurst { return b.global })
	assert.Equal(t, rateBurst{Rate: 60, Burst: 6}, highest(ps, at(30_000), at(30_000)), "a failed lower may not have happened")
}

func ok200(id string, conn int64, start, end time.Time) request {
	return request{ID: id, Tenant: "acme", Status: http.StatusOK, Conn: conn, Start: start, End: end}
}

func TestCheckRuns(t *testing.T) {
	kills := []kill{{Worker: "worker1", Pid: 10, At: at(1_050), Conns: []int64{7}, Known: true}}
	rs := []request{
		ok200("once", 5, at(0), at(100)),
		// Ran on worker1's connection, which was killed mid-request: excused.
		ok200("killed", 7, at(1_000), at(1_100)), ok200("killed", 9, at(70_000), at(70_100)),
		// Ran on another connection: the kill does not excuse it.
		ok200("other", 8, at(1_000), at(1_100)), ok200("other", 9, at(70_000), at(70_100)),
		// Ran on worker1's connection long before the kill: it was done.
		ok200("done", 7, at(-10_000), at(-9_900)), ok200("done", 9, at(70_000), at(70_100)),
		// A 429 is no run.
		ok200("refused", 7, at(0), at(100)), {ID: "refused", Status: http.StatusTooManyRequests, Start: at(200), End: at(200)},
	}
	dups := checkRuns(rs, map[string]bool{"once": true}, kills, nil, nil)
	got := make(map[string]bool)
	for _, d := range dups {
		got[d.ID] = d.Excused
	}
	assert.Equal(t, map[string]bool{"killed": true, "other": false, "done": false, "once": false}, got,
		"'once' is still queued after it ran, with no kill of its worker")

	// An outage between the answer and the kill lengthens the wait for the ack.
	outages := []span{{at(-9_800), at(-4_000)}}
	dups = checkRuns(rs[5:7], nil, kills, outages, nil)
	require.Len(t, dups, 1)
	assert.False(t, dups[0].Excused, "10.9 s after the answer, with 5.8 s of outage: still too late")
	outages = []span{{at(-9_800), at(-1_000)}}
	dups = checkRuns(rs[5:7], nil, kills, outages, nil)
	assert.True(t, dups[0].Excused, "with 8.8 s of outage the ack may not have been made")

	// Where connections cannot be seen, any kill while it ran excuses it.
	unknown := []kill{{Worker: "worker2", At: at(1_050)}}
	dups = checkRuns(rs[3:5], nil, unknown, nil, nil)
	assert.True(t, dups[0].Excused)

	// asynq lost an acknowledgement of the job before it ran again: excused, and said so.
	acks := map[string][]time.Time{"other": {at(5_000)}}
	dups = checkRuns(rs[3:5], nil, nil, nil, acks)
	assert.True(t, dups[0].Excused)
	assert.True(t, dups[0].ByAck)
	acks = map[string][]time.Time{"other": {at(80_000)}}
	dups = checkRuns(rs[3:5], nil, nil, nil, acks)
	assert.False(t, dups[0].Excused, "a lost ack after the second run explains nothing")
}

func TestCheckInFlight(t *testing.T) {
	rs := []request{
		{Tenant: "a", Start: at(0), End: at(100)},
		{Tenant: "a", Start: at(50), End: at(150)},
		{Tenant: "a", Start: at(100), End: at(200)}, // starts as the first ends
		{Tenant: "b", Start: at(0), End: at(500)},
	}
	got := checkInFlight(rs)
	require.Len(t, got, 2)
	assert.Equal(t, flightResult{Tenant: "a", Most: 2, At: at(50)}, got[0])
	assert.Equal(t, 1, got[1].Most)
}

func TestCheckPauses(t *testing.T) {
	refused := request{ID: "x", Tenant: "acme", Status: http.StatusTooManyRequests, RetryAfter: 2, Start: at(0), End: at(10)}
	rs := []request{
		refused,
		ok200("in-flight", 1, at(200), at(300)),  // within the grace: already sent
		ok200("breach", 1, at(1_000), at(1_100)), // acme, during the Retry-After
		{ID: "other", Tenant: "globex", Status: http.StatusOK, Start: at(1_000), End: at(1_100)},
		ok200("after", 1, at(2_100), at(2_200)),
		ok200("cooled", 1, at(6_000), at(6_100)), // during the cooldown, past grace + max-wait
		ok200("booked", 1, at(5_500), at(5_600)), // a turn booked before it
	}
	cds := []cooldown{{Start: at(5_000), End: at(5_100), For: 2 * time.Second, Tenant: "acme"}}
	breaches, others := checkPauses(rs, cds, 500*time.Millisecond, noLateness)
	var ids []string
	for _, b := range breaches {
		ids = append(ids, b.Req.ID)
	}
	assert.Equal(t, []string{"breach", "cooled"}, ids)
	assert.Equal(t, 1, others, "globex's request during acme's Retry-After")
}

// A job that ran and still has a live task would run again, unless that
// task's send-back copy is on the queue too (the pool drops such a task when
// asynq hands it over again).
func TestRerunLeft(t *testing.T) {
	copyOf := map[string]string{"sluice-origin": "j", "sluice-requeues": "1"}
	assert.False(t, rerunLeft([]task{{ID: "j", State: "completed"}, {ID: "j~1", State: "completed"}}), "all done")
	assert.True(t, rerunLeft([]task{{ID: "j", State: "active"}}), "a live task with no copy runs again")
	assert.False(t, rerunLeft([]task{{ID: "j", State: "active"}, {ID: "j~1", State: "completed"}}),
		"the original's copy ran: the original is dropped when it comes back")
	assert.True(t, rerunLeft([]task{{ID: "j", State: "completed"}, {ID: "j~1", State: "active", Headers: copyOf}}),
		"a live copy with no copy of its own runs again")
	assert.False(t, rerunLeft([]task{{ID: "j~1", State: "retry", Headers: copyOf}, {ID: "j~2", State: "completed"}}),
		"a copy's own copy ran")
}
