package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

// TestSplitRedisOneDown runs a worker whose queues and buckets live on two
// redis-server processes (--limiter-redis), and takes each down in turn.
//
// Limiter Redis down: the worker says the limiter store is unavailable,
// grants nothing new (fail closed), and sends jobs back to the queue; none is
// lost or archived, and all complete once the limiter Redis is back, empty.
//
// Queue Redis down: the limiter keeps working (a throttle call on its Redis
// succeeds), and the worker's errors name the queue Redis, not the limiter;
// once the queue Redis is back the worker takes new jobs again.
func TestSplitRedisOneDown(t *testing.T) {
	const (
		jobs  = 100
		rate  = 20.0
		slots = 10
		// granted is how far ahead a worker can hold tokens granted before
		// the limiter Redis went: a reservation for each of its slots.
		granted = time.Duration(slots / rate * float64(time.Second))
		// outage is how long the limiter Redis stays down.
		outage = 3 * time.Second
		// healthWithin bounds how long the worker takes to say the queue
		// Redis is down: asynq's health check runs every 15 s.
		healthWithin = 20 * time.Second
	)
	limit := throttle.Limit{Rate: rate, Period: time.Second, Burst: 5}
	probe := startJitterProbe(t)
	qsrv := redistest.Start(t)
	lsrv := redistest.Start(t)
	insp := newInspector(t, qsrv)
	up := newUpstream(t, upstreamConfig{})
	w := startWorker(t, "worker", qsrv.URL(), "--limiter-redis", lsrv.URL(),
		"--concurrency", "10", "--limit", "http:request=20/s,burst=5", "--failure-policy", "closed")
	waitServers(t, insp, startTimeout, w)

	// The limiter Redis goes away part way through a run.
	ids := jobIDs("job", jobs)
	probe.Reset()
	enqueueIDs(t, qsrv, up, ids, nil)
	require.True(t, poll(20*time.Second, 10*time.Millisecond, func() bool { return up.Count(http.StatusOK) >= 20 }),
		"the worker did not get going")
	lsrv.Kill(t)
	down := time.Now()
	time.Sleep(outage)
	logDown := logEntries(w)
	qi := queueInfo(t, insp)
	lsrv.Restart(t)
	up2 := time.Now()

	// Requests sent while the limiter was down, beyond the tokens granted
	// before it went, allowing 100 ms and the machine's scheduling delay
	// for their arrival.
	var late int
	for _, r := range up.Requests() {
		if r.At.After(down.Add(granted+100*time.Millisecond+probe.Worst())) && r.At.Before(up2) {
			late++
		}
	}
	assert.Equal(t, 0, late, "requests sent while the limiter Redis was down, more than %v after it went", granted)
	assert.Equal(t, 0, qi.Archived, "archived tasks while the limiter Redis was down")
	var limiterErrs, queueBlamed []string
	for _, e := range logDown {
		if e.Time.Before(down) {
			continue
		}
		s := e.text()
		if strings.Contains(s, "limiter") && strings.Contains(s, "unavailable") {
			limiterErrs = append(limiterErrs, e.Msg)
		}
		if strings.Contains(s, "queue store") || strings.Contains(s, "asynq's Redis") {
			queueBlamed = append(queueBlamed, e.Msg)
		}
	}
	t.Logf("limiter Redis down for %v: %d log lines say the limiter is unavailable, e.g. %q; %d blame the queue Redis",
		outage, len(limiterErrs), first(limiterErrs), len(queueBlamed))
	assert.NotEmpty(t, limiterErrs, "log lines saying the limiter store is unavailable")
	assert.Empty(t, queueBlamed, "log lines blaming the queue Redis while the limiter Redis was down")

	qi = waitDrained(t, insp, drainTimeout)
	ok := okByID(up.Requests())
	for _, id := range ids {
		assert.GreaterOrEqual(t, ok[id], 1, "job %s never completed", id)
	}
	assert.Equal(t, 0, qi.Archived, "archived tasks")
	t.Logf("every job completed %v after the limiter Redis came back", time.Since(up2).Round(time.Millisecond))

	// Now the queue Redis goes away; the limiter's keeps working.
	qsrv.Kill(t)
	qdown := time.Now()
	lim := throttle.NewLimiter(throttle.NewRedisStore(lsrv.Client(t)), throttle.WithKeyPrefix(keyPrefix))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := lim.TryAcquire(ctx, "probe", limit, 1)
	cancel()
	assert.NoError(t, err, "a throttle call on the limiter Redis while the queue Redis is down")

	var named logEntry
	found := poll(healthWithin, 100*time.Millisecond, func() bool {
		var ok bool
		named, ok = findLog(w, func(e logEntry) bool {
			s := e.text()
			return e.Time.After(qdown) && (strings.Contains(s, "queue store") || strings.Contains(s, "asynq's Redis") ||
				strings.Contains(s, "queue Redis"))
		})
		return ok
	})
	assert.True(t, found, "no log line named the queue Redis within %v of it going down", healthWithin)
	t.Logf("queue Redis down: the worker said so after %v: %s", named.Time.Sub(qdown).Round(time.Millisecond), named.text())
	for _, e := range logEntries(w) {
		if e.Time.After(qdown) && strings.Contains(e.text(), "limiter") && strings.Contains(e.text(), "unavailable") {
			assert.Fail(t, "a log line blamed the limiter while the queue Redis was down", e.text())
			break
		}
	}
	require.False(t, w.Exited(), "the worker exited while the queue Redis was down")

	// Back, empty: the worker takes new jobs again.
	qsrv.Restart(t)
	more := jobIDs("after", 10)
	enqueueIDs(t, qsrv, up, more, nil)
	waitDrained(t, insp, drainTimeout)
	ok = okByID(up.Requests())
	for _, id := range more {
		assert.Equal(t, 1, ok[id], "job %s after the queue Redis came back", id)
	}
	s, _ := stopWorker(t, w, stopTimeout)
	assert.Equal(t, int64(0), s.Archived, "jobs the worker archived")
}

// first returns the first of ss, or "".
func first(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return ss[0]
}
