package integration

import (
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestFleetSlidingLog runs three workers under
// `--limit 'http:request=40/s,policy=sliding-log'`: at most 40 requests in
// any second, across the fleet. The upstream enforces nothing and records
// arrivals; no window of a second (less the scheduling jitter the machine
// showed, which can bring a late request closer to a later one) holds more
// than 40, and the fleet uses the limit: 200 jobs take about 4 s (40 at
// once, then 40 more as each second's first ones leave the log).
func TestFleetSlidingLog(t *testing.T) {
	const (
		jobs = 200
		max  = 40
	)
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	probe := startJitterProbe(t)
	up := newUpstream(t, upstreamConfig{})
	fleet := startFleet(t, srv, insp, fleetSize, "--concurrency", concurrency,
		"--limit", "http:request=40/s,policy=sliding-log")

	probe.Reset()
	enqueue(t, srv.URL(), "--type", "http:request", "--count", strconv.Itoa(jobs), "--payload", up.Payload(t, "", ""))
	qi := waitDrained(t, insp, drainTimeout)
	stats := stopFleet(t, fleet, stopTimeout)

	at := arrivals(up.Requests(), http.StatusOK)
	window := time.Second - probe.Worst() - upstreamJitter
	busiest := mostInWindow(at, window)
	makespan := at[len(at)-1].Sub(at[0])
	ideal := time.Duration(jobs/max-1) * time.Second
	t.Logf("makespan %.3fs, ideal %.3fs; at most %d requests in any %v; worst scheduling delay %v",
		makespan.Seconds(), ideal.Seconds(), busiest, window.Round(time.Millisecond), probe.Worst())

	assert.Len(t, at, jobs, "requests answered 200")
	assert.LessOrEqual(t, busiest, max, "requests in one window")
	assert.GreaterOrEqual(t, mostInWindow(at, time.Second), max*9/10, "the fleet uses the limit")
	assert.Less(t, makespan.Seconds(), 1.1*ideal.Seconds()+0.5, "makespan, in seconds")
	assert.Equal(t, 0, qi.Archived, "archived tasks")
	assert.Equal(t, int64(jobs), stats.Processed, "jobs the workers processed")
	assert.Equal(t, int64(0), stats.Failed, "jobs that failed")
}

// TestFleetLeakyBucket runs three workers under
// `--limit 'http:request=50/s,policy=leaky-bucket,capacity=100'`: an even
// pace of one request every 20 ms across the fleet, with no burst. The
// arrivals conform to a 50/s bucket holding one token, up to the scheduling
// jitter the machine showed, and their median gap is 20 ms.
func TestFleetLeakyBucket(t *testing.T) {
	const (
		jobs = 200
		rate = 50.0
	)
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	probe := startJitterProbe(t)
	up := newUpstream(t, upstreamConfig{})
	fleet := startFleet(t, srv, insp, fleetSize, "--concurrency", concurrency,
		"--limit", "http:request=50/s,policy=leaky-bucket,capacity=100")

	probe.Reset()
	enqueue(t, srv.URL(), "--type", "http:request", "--count", strconv.Itoa(jobs), "--payload", up.Payload(t, "", ""))
	qi := waitDrained(t, insp, drainTimeout)
	stats := stopFleet(t, fleet, stopTimeout)

	at := arrivals(up.Requests(), http.StatusOK)
	gaps := make([]time.Duration, 0, len(at))
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]))
	}
	slices.Sort(gaps)
	median := gaps[len(gaps)/2]
	worst, _ := excess(at, rate, 1)
	allowance := float64(probe.Worst()+upstreamJitter)*rate/float64(time.Second) + 0.5 // half a token for the loopback
	makespan := at[len(at)-1].Sub(at[0])
	t.Logf("makespan %.3fs, ideal %.3fs; median gap %v; worst arrival %.2f tokens ahead of an even 50/s pace (allowance %.2f); worst scheduling delay %v",
		makespan.Seconds(), float64(jobs-1)/rate, median, worst, allowance, probe.Worst())

	assert.Len(t, at, jobs, "requests answered 200")
	assert.InDelta(t, 20, float64(median)/float64(time.Millisecond), 2, "median gap, in ms")
	assert.LessOrEqual(t, worst, allowance, "tokens ahead of the pace")
	assert.Equal(t, 0, qi.Archived, "archived tasks")
	assert.Equal(t, int64(jobs), stats.Processed, "jobs the workers processed")
	assert.Equal(t, int64(0), stats.Failed, "jobs that failed")
}

// mostInWindow is the largest number of times in at (sorted) that fall in
// one half-open window [t, t+w).
func mostInWindow(at []time.Time, w time.Duration) int {
	most, i := 0, 0
	for j := range at {
		for at[j].Sub(at[i]) >= w {
			i++
		}
		most = max(most, j-i+1)
	}
	return most
}
