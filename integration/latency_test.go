package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
)

// The bar of issue #28: three workers × 30 with in-flight=auto against an
// upstream that serves C = 20 at once in S = 50 ms and queues the rest
// (503 beyond a queue of 2·C). The fleet's throughput is at least 90 % of
// C/S, p99 latency at most 2·S, at most 1 % 503s; when C drops to 8 the
// bound is within ±25 % of 8 within 10 s and stays; when C returns to 20 it
// climbs back within 15 s.
//
// In CI each phase lasts 7 s (about 25 s in all). SLUICE_LATENCY_FULL=1
// runs the 10 s / 15 s / 15 s, and SLUICE_LATENCY_PLOT=FILE.svg
// writes the recorded bound and latency as a figure (docs/adaptive.md):
//
//	SLUICE_LATENCY_FULL=1 SLUICE_LATENCY_PLOT=$PWD/docs/inflight-auto.svg \
//	  go test -run TestInFlightAutoFindsTheKnee -v ./integration
func TestInFlightAutoFindsTheKnee(t *testing.T) {
	phases := [3]time.Duration{7 * time.Second, 7 * time.Second, 7 * time.Second}
	if os.Getenv("SLUICE_LATENCY_FULL") != "" {
		phases = [3]time.Duration{10 * time.Second, 15 * time.Second, 15 * time.Second}
	}
	const (
		c1, c2 = 20, 8
		s      = 50 * time.Millisecond
		// slowStart bounds how long the fleet's bound takes from the floor
		// to C: asynq's first fetches (a worker polls its empty queue once a
		// second before the backlog arrives), then slow start's doublings,
		// one a window, a window late when a loaded host stalls one.
		slowStart = 5 * time.Second
	)
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	fleet := startFleet(t, srv, insp, 3, "--concurrency", "30",
		"--limit", "http:request=5000/s,burst=500,in-flight=auto:1-200")
	up := newKneeUpstream(t, c1, s)
	rdb := srv.Client(t)

	// Keep a backlog: enough jobs queued that no worker ever waits for one.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var feed sync.WaitGroup
	feed.Add(1)
	go func() {
		defer feed.Done()
		qc := queue.NewClient(asynq.NewClientFromRedisClient(rdb))
		payload := []byte(up.payload(t))
		for i := 0; ctx.Err() == nil; {
			qi, err := insp.GetQueueInfo("default")
			if err == nil && qi.Pending > 1500 {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			for range 500 {
				i++
				if _, err := qc.Enqueue(ctx, queue.Task{Type: "http:request", Payload: payload}, asynq.MaxRetry(5), asynq.TaskID("k"+strconv.Itoa(i))); err != nil && ctx.Err() == nil {
					t.Errorf("enqueue: %v", err)
					return
				}
			}
		}
	}()

	// Record the fleet's bound as the test reads it from Redis.
	lim := throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix(keyPrefix))
	c := throttle.Concurrency{Max: 200, Floor: 1, Auto: true}
	var series []kneePoint
	begin := time.Now()
	up.start = begin
	sample := func(until time.Duration) {
		for time.Since(begin) < until {
			time.Sleep(100 * time.Millisecond)
			st, err := lim.InFlight(ctx, "http:request:inflight", c)
			if err != nil {
				continue
			}
			series = append(series, kneePoint{at: time.Since(begin), limit: int(st.Rate), bound: st.Bound, held: st.Held,
				recent: st.Recent, base: st.Baseline, c: up.capacity(), probe: st.Reason == "probe", why: st.Reason})
		}
	}
	sample(phases[0])
	up.SetC(c2)
	sample(phases[0] + phases[1])
	up.SetC(c1)
	sample(phases[0] + phases[1] + phases[2])
	cancel()
	feed.Wait()
	end := time.Since(begin)
	stopFleet(t, fleet, stopTimeout)

	// Phase 1's steady state runs from the first reading of the bound at C:
	// slow start's time is checked on its own, so that a late start (a
	// stalled window on a loaded host) is not read as a bound below the knee.
	warmup := phases[0]
	for _, p := range series {
		if p.bound >= c1 {
			warmup = p.at
			break
		}
	}
	assert.LessOrEqual(t, warmup, slowStart, "slow start reaches C=%d", c1)
	warmup = min(warmup, phases[0]-2*time.Second)
	p1 := figuresOf(up.between(warmup, phases[0]), phases[0]-warmup)
	all := figuresOf(up.between(0, end), end)
	t.Logf("phase 1 (C=%d, from %v): %.1f/s of %.0f/s (%.1f%%), p50 %v, p99 %v, 503s %.2f%% of %d",
		c1, warmup, p1.okPerS, c1/s.Seconds(), 100*p1.okPerS/(c1/s.Seconds()), p1.p50, p1.p99, 100*p1.unavailable, p1.n)
	t.Logf("whole run: %.2f%% 503s of %d answers", 100*all.unavailable, all.n)
	assert.GreaterOrEqual(t, p1.okPerS, 0.9*c1/s.Seconds(), "throughput at least 90%% of C/S")
	assert.LessOrEqual(t, p1.p99, 2*s, "p99 latency at most 2·S")
	assert.LessOrEqual(t, all.unavailable, 0.01, "at most 1%% of answers 503")

	// After the drop: within 10 s (or the phase) the learned bound is within
	// ±25 % of 8, and it stays there until C comes back. (In a probe window,
	// one in about 16, Hold grants half of it: counted apart.)
	settle := min(10*time.Second, phases[1]-time.Second)
	drop, rise := phases[0], phases[0]+phases[1]
	var in, out []int
	probes := 0
	for _, p := range series {
		if p.probe {
			probes++
		}
		if p.at >= drop+settle && p.at < rise {
			in = append(in, p.limit)
			if float64(p.limit) < 0.75*c2 || float64(p.limit) > 1.25*c2 {
				out = append(out, p.limit)
			}
		}
	}
	require.NotEmpty(t, in, "samples after the drop")
	assert.Empty(t, out, "bound within 8±25%% from %v after the drop: %v", settle, in)
	settledAt := settleTime(series, drop, rise, func(b int) bool { return float64(b) >= 0.75*c2 && float64(b) <= 1.25*c2 })
	// After the rise: back within ±25 % of 20 within 15 s (or the phase):
	// the issue asks that it climbs back, not that it stays (a host that
	// stalls slows the upstream's answers, and the bound follows them).
	backAt := firstTime(series, rise, end, func(b int) bool { return float64(b) >= 0.75*c1 })
	assert.GreaterOrEqual(t, backAt, time.Duration(0), "the bound climbed back after C returned")
	assert.LessOrEqual(t, backAt, min(15*time.Second, phases[2]), "within 15 s")
	p3 := figuresOf(up.between(rise+backAt, end), end-rise-backAt)
	t.Logf("after the drop: within 8±25%% %v later; after the rise: back %v later; phase 3 once back: %.1f/s, p99 %v; %d of %d readings in a probe",
		settledAt, backAt, p3.okPerS, p3.p99, probes, len(series))
	t.Logf("%s", kneeASCII(series))
	t.Logf("%s", kneeAnomalies(series, up))
	if path := os.Getenv("SLUICE_LATENCY_PLOT"); path != "" {
		require.NoError(t, os.WriteFile(path, []byte(kneeSVG(series, up, end, s)), 0o644))
		t.Logf("wrote %s", path)
	}
}

// kneePoint is one reading of the fleet's bound: the learned limit, and the
// bound Hold grants (the limit's, but half of it in a probe window).
type kneePoint struct {
	at                 time.Duration
	limit, bound, held int
	recent, base       time.Duration
	c                  int
	probe              bool
	why                string
}

// settleTime is how long after from the learned bound first met ok and then kept
// meeting it until to; -1 if it never did.
func settleTime(series []kneePoint, from, to time.Duration, ok func(int) bool) time.Duration {
	at := time.Duration(-1)
	for _, p := range series {
		if p.at < from || p.at >= to {
			continue
		}
		switch {
		case !ok(p.limit):
			at = -1
		case at < 0:
			at = p.at - from
		}
	}
	return at
}

// firstTime is how long after from the learned bound first met ok before
// to; -1 if it did not.
func firstTime(series []kneePoint, from, to time.Duration, ok func(int) bool) time.Duration {
	for _, p := range series {
		if p.at >= from && p.at < to && ok(p.limit) {
			return p.at - from
		}
	}
	return -1
}

func (u *kneeUpstream) capacity() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.c
}

// payload is an http:request job's payload, a GET of the upstream.
func (u *kneeUpstream) payload(tb testing.TB) string {
	return fmt.Sprintf(`{"url": %q, "method": "GET"}`, u.srv.URL+"/q")
}
