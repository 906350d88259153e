package integration

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/internal/redistest"
)

// adaptiveRun is what one run of a fleet against a fake API measured.
type adaptiveRun struct {
	rs       []request
	status   map[int]int
	makespan time.Duration
	refused  float64 // the share of answers that were 429
	qi       asynq.QueueInfo
	stats    finalStats
}

// runAdaptive runs three built workers under limit against an API of cfg,
// with jobs http:request jobs, until the queue is drained, and logs what it
// measured and each decrease of the effective rate.
func runAdaptive(t *testing.T, cfg upstreamConfig, limit string, jobs int) adaptiveRun {
	t.Helper()
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, cfg)
	fleet := startFleet(t, srv, insp, fleetSize, "--concurrency", concurrency, "--limit", limit)
	enqueue(t, srv.URL(), "--type", "http:request", "--count", strconv.Itoa(jobs), "--payload", up.Payload(t, "", ""))
	r := adaptiveRun{qi: waitDrained(t, insp, 120*time.Second), stats: stopFleet(t, fleet, stopTimeout)}
	r.rs = up.Requests()
	r.status = byStatus(r.rs)
	r.makespan = span(r.rs)
	r.refused = float64(r.status[http.StatusTooManyRequests]) / float64(len(r.rs))
	for _, w := range fleet {
		for _, e := range logEntries(w) {
			if e.Msg == "workers: upstream refused: the fleet's effective rate for the bucket is lowered" {
				t.Logf("%s at +%.2fs: effective rate %.1f/s", w.name, e.Time.Sub(r.rs[0].At).Seconds(), e.Fields["rate"])
			}
		}
	}
	var refusedAt []string
	for _, q := range r.rs {
		if q.Status != http.StatusOK {
			refusedAt = append(refusedAt, fmt.Sprintf("+%.3fs", q.At.Sub(r.rs[0].At).Seconds()))
		}
	}
	t.Logf("makespan %.2fs; answers %v (%.1f%% 429, at %v); cooldowns %d, requeues %d",
		r.makespan.Seconds(), r.status, 100*r.refused, refusedAt, r.stats.Cooldowns, r.stats.Requeued)
	return r
}

// TestAdaptiveOverConfigured is issue #10's first case: three workers
// configured at 80/s (adapt on by default) before an API that allows 50/s
// burst 5 and answers 429 with Retry-After beyond it. The fleet learns the
// lower rate: 300 jobs finish close to the ideal 5.9 s, few answers are
// 429, none is archived. (Without adapting, measured at 31.0 s with 29
// answers 429.)
func TestAdaptiveOverConfigured(t *testing.T) {
	const jobs = 300
	r := runAdaptive(t, upstreamConfig{Rate: 50, Burst: 5}, "http:request=80/s,burst=8", jobs)
	ideal := idealMakespan(jobs, 50, 5)
	t.Logf("ideal %.2fs (%.2fx)", ideal.Seconds(), r.makespan.Seconds()/ideal.Seconds())
	assert.Equal(t, jobs, r.status[http.StatusOK], "every job done")
	assert.Less(t, r.makespan.Seconds(), 1.35*ideal.Seconds(), "makespan within 1.35x the ideal")
	assert.LessOrEqual(t, r.refused, 0.02, "at most 2%% of answers 429")
	assert.Equal(t, 0, r.qi.Archived, "archived")
	assert.Equal(t, int64(0), r.stats.Archived)
}

// TestAdaptiveAnnounced is issue #10's second case: workers configured at
// 200/s before an API that allows 50/s burst 5 and says so in IETF
// RateLimit-Policy / RateLimit fields on every answer. The fleet adopts the
// announced 50/s from the first answers on, and holds the bucket when the
// announced remaining quota is 0.
func TestAdaptiveAnnounced(t *testing.T) {
	const jobs = 300
	r := runAdaptive(t, upstreamConfig{Rate: 50, Burst: 5, Announce: "ietf"}, "http:request=200/s,burst=5", jobs)
	ideal := idealMakespan(jobs, 50, 5)
	t.Logf("ideal %.2fs (%.2fx)", ideal.Seconds(), r.makespan.Seconds()/ideal.Seconds())
	assert.Equal(t, jobs, r.status[http.StatusOK], "every job done")
	// Measured 5.92–5.97 s (1.00–1.01x), no 429, in 9 runs out of 9: every
	// reserve reads the effective rate beside the bucket, so the quota the
	// first answer announces holds for every process's next grant. (When
	// each process cached the rate for 250 ms, one run in five drew a 429 in
	// the first 5 ms and took 7.1–7.3 s.)
	//
	// A request the fleet booked at the configured 200/s before the first
	// answer reached it may still draw a 429 on a loaded machine (one CI run
	// in five: one 429, 7.22 s), and that answer rightly pauses the fleet for
	// its Retry-After, a second here (this upstream rounds its wait up to
	// whole seconds). That pause is the 429's, not the adopted rate's: the
	// bound allows it, and the share of 429s below bounds how many there are.
	pauses := time.Duration(r.status[http.StatusTooManyRequests]) * time.Second
	assert.Less(t, r.makespan.Seconds(), 1.15*ideal.Seconds()+pauses.Seconds(),
		"makespan within 1.15x the ideal, plus a Retry-After per 429")
	assert.LessOrEqual(t, r.refused, 0.01, "at most 1%% of answers 429")
	assert.Equal(t, 0, r.qi.Archived, "archived")
}

// TestAdaptiveColdStart is issue #30's item 5: three workers configured at
// 200/s burst 20 (four times the upstream's limits) before an API announcing
// 50/s burst 5 in IETF fields. The bucket is cold: the fleet sends one
// request, and its answer sets the rate before the configured burst is
// granted, so no request is refused. (Before the cold start the issue
// measured, two runs in three, five 429s in the first milliseconds and
// 7.0–7.4 s for the ideal 5.9 s.)
func TestAdaptiveColdStart(t *testing.T) {
	const jobs = 300
	r := runAdaptive(t, upstreamConfig{Rate: 50, Burst: 5, Announce: "ietf"}, "http:request=200/s,burst=20", jobs)
	ideal := idealMakespan(jobs, 50, 5)
	t.Logf("ideal %.2fs (%.2fx)", ideal.Seconds(), r.makespan.Seconds()/ideal.Seconds())
	assert.Equal(t, jobs, r.status[http.StatusOK], "every job done")
	assert.Equal(t, 0, r.qi.Archived, "archived")
	assert.Less(t, r.makespan.Seconds(), 1.2*ideal.Seconds(), "makespan within 1.2x the ideal")
	assert.LessOrEqual(t, r.refused, 0.01, "at most 1%% of answers 429")
}

// TestAdaptiveAnnouncedX is the same with X-RateLimit-Limit / -Remaining /
// -Reset fields, which name no window. This upstream's reset (the time until
// its bucket of 5 is full) is always under a second, written 1: no rate can
// be read from it, so each spent quota holds the bucket for the whole second
// and lowers the effective rate as a 429 would (blind, ×0.6). Measured
// 9.2–9.4 s (1.56–1.59x the ideal), 0–1 answers 429; 15.1 s when the remaining quota over
// a rounded-up second was taken for a rate. Bounded loosely: the IETF
// fields, which name the rate, are what reach the ideal.
func TestAdaptiveAnnouncedX(t *testing.T) {
	const jobs = 300
	r := runAdaptive(t, upstreamConfig{Rate: 50, Burst: 5, Announce: "x"}, "http:request=200/s,burst=5", jobs)
	ideal := idealMakespan(jobs, 50, 5)
	t.Logf("ideal %.2fs (%.2fx)", ideal.Seconds(), r.makespan.Seconds()/ideal.Seconds())
	assert.Equal(t, jobs, r.status[http.StatusOK], "every job done")
	assert.Less(t, r.makespan.Seconds(), 2*ideal.Seconds(), "makespan, loosely")
	assert.LessOrEqual(t, r.refused, 0.02, "answers 429")
	assert.Equal(t, 0, r.qi.Archived, "archived")
}

// TestAdaptiveMovingLimit is issue #10's third case: configured at 80/s
// before an API whose limit moves 50 → 20 → 50/s (4 s each, burst 5, 429 with
// Retry-After beyond it). The fleet follows it down and back up; nothing is
// archived or lost. (Without adapting, the issue measured 43.4 s and 40
// answers 429 for 400 jobs; the ideal is about 10.3 s.)
func TestAdaptiveMovingLimit(t *testing.T) {
	const jobs = 400
	r := runAdaptive(t, upstreamConfig{Rate: 50, Burst: 5, Schedule: []rateStep{{4 * time.Second, 20}, {8 * time.Second, 50}}},
		"http:request=80/s,burst=8", jobs)
	perPhase := [4]int{}
	for _, q := range r.rs {
		if q.Status == http.StatusOK {
			perPhase[min(int(q.At.Sub(r.rs[0].At)/(4*time.Second)), 3)]++
		}
	}
	t.Logf("ideal about 10.3s; 200s per 4 s phase %v", perPhase)
	assert.Equal(t, jobs, r.status[http.StatusOK], "every job done")
	assert.Equal(t, 0, r.qi.Archived, "archived")
	assert.Less(t, r.makespan.Seconds(), 25.0, "loosely: the fleet tracks the limit back up (43.4 s without adapting)")
	// Recovery is slow (+0.5 % of the ceiling a second above 80 % of the
	// rate that failed): the third phase has measured 59 to 89 jobs, more
	// than the second's 30 to 51, far from the 200 the API allows.
	assert.Greater(t, perPhase[2], perPhase[1], "the rate rises again once the limit does")
}
