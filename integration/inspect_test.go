package integration

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
)

// queueName is the asynq queue every test uses (the commands' default).
const queueName = "default"

// newInspector returns an asynq.Inspector on srv, closed when tb ends.
func newInspector(tb testing.TB, srv *redistest.Server) *asynq.Inspector {
	tb.Helper()
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr()})
	tb.Cleanup(func() { _ = insp.Close() })
	return insp
}

// queueInfo returns the queue's counts; a queue no task has reached yet has
// all zero counts.
func queueInfo(tb testing.TB, insp *asynq.Inspector) asynq.QueueInfo {
	tb.Helper()
	qi, err := insp.GetQueueInfo(queueName)
	if err != nil {
		if qs, qerr := insp.Queues(); qerr == nil && !slices.Contains(qs, queueName) {
			return asynq.QueueInfo{Queue: queueName}
		}
		tb.Fatalf("inspect queue %q: %v", queueName, err)
	}
	return *qi
}

// counts is a QueueInfo's task counts, printable in a failure message.
func counts(qi asynq.QueueInfo) string {
	return fmt.Sprintf("pending=%d active=%d scheduled=%d retry=%d archived=%d",
		qi.Pending, qi.Active, qi.Scheduled, qi.Retry, qi.Archived)
}

// waitDrained waits up to timeout until the queue holds no pending, active,
// scheduled or retry task, and returns its final counts; it fails the test if
// the queue does not drain in time.
func waitDrained(tb testing.TB, insp *asynq.Inspector, timeout time.Duration) asynq.QueueInfo {
	tb.Helper()
	qi, ok := drained(tb, insp, timeout)
	if !ok {
		tb.Fatalf("queue %q not drained after %v: %s", queueName, timeout, counts(qi))
	}
	return qi
}

// drained is waitDrained for a test that goes on to report what it can: it
// reports whether the queue drained instead of failing the test.
func drained(tb testing.TB, insp *asynq.Inspector, timeout time.Duration) (asynq.QueueInfo, bool) {
	tb.Helper()
	var qi asynq.QueueInfo
	ok := poll(timeout, 100*time.Millisecond, func() bool {
		qi = queueInfo(tb, insp)
		return qi.Pending+qi.Active+qi.Scheduled+qi.Retry == 0
	})
	return qi, ok
}

// archivedTasks returns every archived task of the queue, with its LastErr.
func archivedTasks(tb testing.TB, insp *asynq.Inspector) []*asynq.TaskInfo {
	tb.Helper()
	return listAll(tb, insp.ListArchivedTasks)
}

// listAll pages through one of the Inspector's List…Tasks methods.
func listAll(tb testing.TB, list func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error)) []*asynq.TaskInfo {
	tb.Helper()
	const size = 500
	var all []*asynq.TaskInfo
	for page := 1; ; page++ {
		ts, err := list(queueName, asynq.PageSize(size), asynq.Page(page))
		if errors.Is(err, asynq.ErrQueueNotFound) {
			return all
		}
		if err != nil {
			tb.Fatalf("list tasks of queue %q: %v", queueName, err)
		}
		all = append(all, ts...)
		if len(ts) < size {
			return all
		}
	}
}

// lastErrs summarises tasks' LastErr for a failure message.
func lastErrs(ts []*asynq.TaskInfo) map[string]int {
	m := make(map[string]int)
	for _, t := range ts {
		m[t.LastErr]++
	}
	return m
}

// waitServers waits until asynq lists a server for each of the processes, so
// that they are taking jobs.
func waitServers(tb testing.TB, insp *asynq.Inspector, timeout time.Duration, procs ...*process) {
	tb.Helper()
	var missing []string
	ok := poll(timeout, 50*time.Millisecond, func() bool {
		servers, err := insp.Servers()
		if err != nil {
			return false
		}
		up := make(map[int]bool)
		for _, s := range servers {
			up[s.PID] = true
		}
		missing = missing[:0]
		for _, p := range procs {
			if p.Exited() {
				tb.Fatalf("%s exited before it started taking jobs", p.name)
			}
			if !up[p.PID()] {
				missing = append(missing, p.name)
			}
		}
		return len(missing) == 0
	})
	if !ok {
		tb.Fatalf("no asynq server registered after %v for %v", timeout, missing)
	}
}
