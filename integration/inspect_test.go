package integration

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
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

// queueInfo returns the queue's counts, summed over its family (a member per
// priority and lane: queue.Family); a member no task has reached yet counts
// zero.
func queueInfo(tb testing.TB, insp *asynq.Inspector) asynq.QueueInfo {
	tb.Helper()
	sum := asynq.QueueInfo{Queue: queueName}
	qs, err := insp.Queues()
	if err != nil {
		tb.Fatalf("list queues: %v", err)
	}
	for _, q := range queue.Family(queueName) {
		if !slices.Contains(qs, q) {
			continue
		}
		qi, err := insp.GetQueueInfo(q)
		if err != nil {
			tb.Fatalf("inspect queue %q: %v", q, err)
		}
		sum.Size += qi.Size
		sum.Pending += qi.Pending
		sum.Active += qi.Active
		sum.Scheduled += qi.Scheduled
		sum.Retry += qi.Retry
		sum.Archived += qi.Archived
		sum.Completed += qi.Completed
		sum.Processed += qi.Processed
		sum.Failed += qi.Failed
	}
	return sum
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

// listAll pages through one of the Inspector's List…Tasks methods, over the
// queue's family.
func listAll(tb testing.TB, list func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error)) []*asynq.TaskInfo {
	tb.Helper()
	var all []*asynq.TaskInfo
	for _, q := range queue.Family(queueName) {
		all = append(all, listQueue(tb, q, list)...)
	}
	return all
}

// listQueue pages through one of the Inspector's List…Tasks methods on queue q.
func listQueue(tb testing.TB, q string, list func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error)) []*asynq.TaskInfo {
	tb.Helper()
	const size = 500
	var all []*asynq.TaskInfo
	for page := 1; ; page++ {
		ts, err := list(q, asynq.PageSize(size), asynq.Page(page))
		if errors.Is(err, asynq.ErrQueueNotFound) {
			return all
		}
		if err != nil {
			tb.Fatalf("list tasks of queue %q: %v", q, err)
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
