package integration

import (
	"encoding/json"
	"net/url"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/httpjob"
	"github.com/sluicehq/sluice/internal/redistest"
)

// asynq's lease recovery, which brings back the jobs of a worker that died
// (asynq v0.26): a job's lease runs 30 s past the last heartbeat that
// extended it, and the recoverer takes only jobs whose lease ran out more
// than another 30 s ago. It runs when a server starts and then once a
// minute, so a dead worker's jobs come back 55–60 s after it died at best,
// and up to two minutes after at worst. The test waits for the real thing.
const (
	leaseGrace = 30 * time.Second // the recoverer's cutoff behind a lease's end
	// orphanTimeout bounds the wait for a dead worker's leases to run out.
	orphanTimeout = 45 * time.Second
)

// TestKilledWorkerLosesNoJob kills a worker with SIGKILL while it holds jobs
// waiting for their turn in Acquire and jobs whose request is in flight,
// and checks that no job is lost: asynq's lease recovery brings them back
// and every job reaches the upstream at least once, none archived for it.
//
// Half the jobs are enqueued with MaxRetry 0. asynq counts a lease that ran
// out as a failure, and archives a job whose retries are spent before any
// sluice code runs, so such a job of the killed worker may be archived with
// "asynq: task lease expired". The test reports what happens to them, and
// checks only that none disappears without a trace.
//
// It takes about 70 s, nearly all of it asynq's lease recovery, and runs in
// parallel with the soak.
func TestKilledWorkerLosesNoJob(t *testing.T) {
	t.Parallel()
	const jobs = 120
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	// A slow upstream, so that at any moment some of a worker's jobs are in
	// flight while the others wait for their turn.
	up := newUpstream(t, upstreamConfig{Delay: 300 * time.Millisecond})
	args := []string{"--concurrency", "10", "--limit", "http:request=20/s,burst=5"}
	victim := startWorker(t, "victim", srv.URL(), args...)
	survivor := startWorker(t, "survivor", srv.URL(), args...)
	waitServers(t, insp, startTimeout, victim, survivor)

	ids := jobIDs("job", jobs)
	noRetry := make(map[string]bool) // the jobs enqueued with MaxRetry 0: every other one
	for i, id := range ids {
		noRetry[id] = i%2 == 1
	}
	enqueueIDs(t, srv, up, ids, func(id string) []asynq.Option {
		if noRetry[id] {
			return []asynq.Option{asynq.MaxRetry(0)}
		}
		return nil // asynq's default, 25
	})

	// Kill the victim once the run is well under way: with ten slots, a
	// 20/s limit shared by two workers and 300 ms per request, it then
	// holds jobs both waiting for their turn and in flight.
	require.True(t, poll(20*time.Second, 10*time.Millisecond, func() bool { return len(up.Requests()) >= 30 }),
		"the fleet did not get going")
	victim.Signal(syscall.SIGKILL)
	victim.Wait(killWait)
	killed := time.Now()
	atKill := up.Requests()

	// The survivor runs every other job; the victim's stay active in asynq,
	// held by a lease nobody renews, until it runs out.
	var orphans []*asynq.TaskInfo
	require.True(t, poll(orphanTimeout, 250*time.Millisecond, func() bool {
		qi := queueInfo(t, insp)
		if qi.Pending+qi.Scheduled+qi.Retry > 0 {
			return false
		}
		orphans = listAll(t, insp.ListActiveTasks)
		return !slices.ContainsFunc(orphans, func(ti *asynq.TaskInfo) bool { return !ti.IsOrphaned })
	}), "the killed worker's jobs were not orphaned within %v of the kill", orphanTimeout)
	orphaned := time.Now()
	var orphanIDs []string
	for _, ti := range orphans {
		orphanIDs = append(orphanIDs, jobID(t, ti))
	}
	slices.Sort(orphanIDs)
	t.Logf("killed the victim %v into the run (%d requests sent); its %d jobs were orphaned %v after the kill: %v",
		killed.Sub(atKill[0].At).Round(time.Millisecond), len(atKill), len(orphans), orphaned.Sub(killed).Round(time.Second), orphanIDs)
	require.NotEmpty(t, orphans, "the victim held no job when it was killed")

	// asynq's recoverer takes a job only once its lease ended leaseGrace
	// ago. A server runs it when it starts: start one as soon as it would
	// take them all, rather than wait up to a minute for the survivor's.
	time.Sleep(time.Until(orphaned.Add(leaseGrace + 500*time.Millisecond)))
	rescuer := startWorker(t, "rescuer", srv.URL(), args...)
	waitServers(t, insp, startTimeout, rescuer)
	qi := waitDrained(t, insp, 30*time.Second)
	recovered := time.Since(killed)

	ok := okByID(up.Requests())
	archived := make(map[string]string) // job id → LastErr
	for _, ti := range archivedTasks(t, insp) {
		archived[jobID(t, ti)] = ti.LastErr
	}
	var dupes, lostNoRetry, archivedNoRetry []string
	for _, id := range ids {
		if ok[id] > 1 {
			dupes = append(dupes, id)
		}
		if noRetry[id] {
			if _, ok := archived[id]; ok {
				archivedNoRetry = append(archivedNoRetry, id)
			}
			if ok[id] == 0 {
				lostNoRetry = append(lostNoRetry, id)
			}
			continue
		}
		assert.GreaterOrEqual(t, ok[id], 1, "job %s (MaxRetry 25) never reached the upstream", id)
		assert.NotContains(t, archived, id, "job %s (MaxRetry 25) archived", id)
	}
	t.Logf("all jobs settled %v after the kill; %d ran twice (at-least-once: killed after the upstream saw them): %v",
		recovered.Round(time.Second), len(dupes), dupes)
	t.Logf("MaxRetry 0 jobs of the killed worker: %d archived %v, reasons %v; %d never reached the upstream %v",
		len(archivedNoRetry), archivedNoRetry, lastErrs(archivedTasks(t, insp)), len(lostNoRetry), lostNoRetry)

	// asynq counts the expired lease as a failure; queue.Client gave every job
	// one spare asynq retry for exactly this, so a MaxRetry 0 job is run again,
	// not archived, and not lost.
	assert.Empty(t, archived, "jobs archived after the kill")
	assert.Empty(t, lostNoRetry, "MaxRetry 0 jobs that never ran")
	assert.Equal(t, 0, qi.Retry, "retrying tasks")
	for _, p := range []*process{survivor, rescuer} {
		s, _ := stopWorker(t, p, stopTimeout)
		assert.Equal(t, int64(0), s.Archived, "%s: jobs archived by the worker", p.name)
	}
}

// jobID is the id in the URL of an http:request task's payload.
func jobID(tb testing.TB, ti *asynq.TaskInfo) string {
	tb.Helper()
	var r httpjob.Request
	if err := json.Unmarshal(ti.Payload, &r); err != nil {
		tb.Fatalf("task %s: payload %q: %v", ti.ID, ti.Payload, err)
	}
	u, err := url.Parse(r.URL)
	if err != nil {
		tb.Fatalf("task %s: url %q: %v", ti.ID, r.URL, err)
	}
	return u.Query().Get("id")
}
