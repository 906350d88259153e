package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/queue"

	"github.com/sluicehq/sluice/internal/httpjob"
)

// report is what the checks found.
type report struct {
	seed     uint64
	duration time.Duration
	took     time.Duration

	enqueued  int
	givenUp   int // enqueues given up at the end of the chaos phase
	requests  int
	byStatus  map[int]int
	storm429  int
	ran       int            // jobs answered 200 at least once
	states    map[string]int // jobs not run, still in the queue, by state
	strangers int            // jobs run that were never acknowledged as enqueued

	lost     []string
	dups     []dup
	grants   []grantResult
	flights  []flightResult
	inFlight int
	pauses   []pauseBreach
	others   int // requests of other tenants during a 429's Retry-After
	archived []archivedJob
	kills    int
	problems []string
	faults   map[string]int
}

// archivedJob is a job asynq archived, with its last error.
type archivedJob struct {
	ID, LastErr string
}

// ok reports whether every check passed.
func (rep *report) ok() bool {
	return len(rep.lost) == 0 && rep.unexcused() == 0 && rep.overGrants() == 0 &&
		rep.flightBreaches() == 0 && len(rep.pauses) == 0 && len(rep.archived) == 0
}

func (rep *report) unexcused() int {
	n := 0
	for _, d := range rep.dups {
		if !d.Excused {
			n++
		}
	}
	return n
}

func (rep *report) overGrants() int {
	n := 0
	for _, g := range rep.grants {
		n += g.Over
	}
	return n
}

func (rep *report) flightBreaches() int {
	n := 0
	for _, f := range rep.flights {
		if f.Most > rep.inFlight {
			n++
		}
	}
	return n
}

// report reads the queue and the logs and runs the checks.
func (r *runState) report() (*report, error) {
	rs := r.up.Requests()
	enq := r.enq.Enqueued()
	present, tasks, archived, err := r.queueStates()
	if err != nil {
		return nil, fmt.Errorf("read the queue at the end: %w", err)
	}
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	rep := &report{
		seed: r.cfg.seed, duration: r.cfg.duration, took: time.Since(r.start),
		enqueued: len(enq), givenUp: len(r.enq.given), requests: len(rs),
		byStatus: make(map[int]int), states: make(map[string]int), archived: archived,
		inFlight: r.base.inFlight, kills: len(r.rec.kills), problems: r.rec.problems,
		faults: make(map[string]int),
	}
	ran := make(map[string]bool)
	for _, q := range rs {
		rep.byStatus[q.Status]++
		if q.Storm {
			rep.storm429++
		}
		if q.Status == http.StatusOK {
			ran[q.ID] = true
		}
	}
	rep.ran = len(ran)
	for id := range ran {
		if _, ok := enq[id]; !ok {
			rep.strangers++
		}
	}
	queued := make(map[string]bool) // ran, and still live in the queue
	for id := range enq {
		st := present[id]
		if ran[id] {
			queued[id] = rerunLeft(tasks[id])
			continue
		}
		if len(st) == 0 {
			rep.lost = append(rep.lost, id)
			continue
		}
		rep.states[strings.Join(st, "+")]++
	}
	sort.Strings(rep.lost)
	var logs []string
	for _, w := range r.fleet {
		logs = append(logs, w.log)
	}
	rep.dups = checkRuns(rs, queued, r.rec.kills, r.rec.outages, lostAcks(logs))

	late := r.probe.WorstIn
	global := phasesOf(r.base, r.rec.limits, r.rec.msgLosses, func(b bounds) rateBurst { return b.global })
	rep.grants = append(rep.grants, checkGrants("global", arrivalsOf(rs, func(request) bool { return true }), global, late))
	perTenant := phasesOf(r.base, r.rec.limits, r.rec.msgLosses, func(b bounds) rateBurst { return b.tenant })
	for _, tn := range tenants {
		at := arrivalsOf(rs, func(q request) bool { return q.Tenant == tn.name })
		rep.grants = append(rep.grants, checkGrants("tenant:"+tn.name, at, perTenant, late))
	}
	rep.flights = checkInFlight(rs)
	rep.pauses, rep.others = checkPauses(rs, r.rec.cooldowns, r.base.maxWait, late)
	for _, e := range r.rec.events {
		for _, k := range []string{"SIGKILL worker", "SIGSTOP redis", "SIGKILL redis", "CLIENT KILL", "SCRIPT FLUSH",
			"429 storm", "upstream quota ", "sluice set", "sluice unset", "sluice cooldown"} {
			if strings.HasPrefix(e.Text, k) && !strings.Contains(e.Text, "back to") {
				rep.faults[strings.TrimSpace(k)]++
			}
		}
	}
	return rep, nil
}

// queueStates lists every task in the queue, in every state, by job id
// (their states, and the tasks); and the archived ones with their last error.
func (r *runState) queueStates() (map[string][]string, map[string][]task, []archivedJob, error) {
	present := make(map[string][]string)
	tasks := make(map[string][]task)
	var archived []archivedJob
	for _, l := range []struct {
		state string
		list  func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error)
	}{
		{"pending", r.insp.ListPendingTasks}, {"active", r.insp.ListActiveTasks},
		{"scheduled", r.insp.ListScheduledTasks}, {"retry", r.insp.ListRetryTasks},
		{"archived", r.insp.ListArchivedTasks}, {"completed", r.insp.ListCompletedTasks},
	} {
		for page := 1; ; page++ {
			ts, err := l.list(queueName, asynq.PageSize(1000), asynq.Page(page))
			if errors.Is(err, asynq.ErrQueueNotFound) {
				break
			}
			if err != nil {
				return nil, nil, nil, fmt.Errorf("list %s tasks: %w", l.state, err)
			}
			for _, t := range ts {
				id := jobIDOf(t.Payload)
				present[id] = append(present[id], l.state)
				tasks[id] = append(tasks[id], task{ID: t.ID, State: l.state, Headers: t.Headers})
				if l.state == "archived" {
					archived = append(archived, archivedJob{ID: id, LastErr: t.LastErr})
				}
			}
			if len(ts) < 1000 {
				break
			}
		}
	}
	sort.Slice(archived, func(i, j int) bool { return archived[i].ID < archived[j].ID })
	return present, tasks, archived, nil
}

// task is one task of a job in the queue at the end.
type task struct {
	ID, State string
	Headers   map[string]string
}

// rerunLeft reports whether a job that ran has a task still live in the
// queue that would run it again: live, and not superseded. A task whose
// send-back copy (queue.Meta.CopyID) is among the job's tasks is superseded:
// its worker was stopped or killed between making the copy and asynq hearing
// the task was done, and when asynq hands it over again the pool drops it
// (workers: superseded) instead of running it.
func rerunLeft(ts []task) bool {
	ids := make(map[string]bool, len(ts))
	for _, t := range ts {
		ids[t.ID] = true
	}
	for _, t := range ts {
		if t.State == "archived" || t.State == "completed" {
			continue
		}
		m, _ := queue.MetaOf(asynq.NewTaskWithHeaders("", nil, t.Headers))
		if !ids[m.CopyID(t.ID)] {
			return true
		}
	}
	return false
}

// jobIDOf is the job id in an http:request payload's URL, or the payload
// itself if it has none.
func jobIDOf(payload []byte) string {
	var req httpjob.Request
	if json.Unmarshal(payload, &req) == nil {
		if u, err := url.Parse(req.URL); err == nil && u.Query().Get("id") != "" {
			return u.Query().Get("id")
		}
	}
	return string(payload)
}

// numbers matches the figures of an error message, so that messages that
// differ only in them group together.
var numbers = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

func (rep *report) print(w io.Writer) {
	fmt.Fprintf(w, "\nresults: seed %d, %v of faults, %v in all\n", rep.seed, rep.duration, rep.took.Round(time.Second))
	fmt.Fprintf(w, "  faults injected: %s\n", mapLine(rep.faults))
	for _, p := range rep.problems {
		fmt.Fprintf(w, "  a fault could not be applied: %s\n", p)
	}
	fmt.Fprintf(w, "  jobs: %d enqueued (%d given up unacknowledged at the end), %d run; not run but still queued: %s\n",
		rep.enqueued, rep.givenUp, rep.ran, mapLine(rep.states))
	fmt.Fprintf(w, "  upstream: %d requests: %d answered 200, %d 429 (%d in storms)\n",
		rep.requests, rep.byStatus[http.StatusOK], rep.byStatus[http.StatusTooManyRequests], rep.storm429)
	if rep.strangers > 0 {
		fmt.Fprintf(w, "  %d jobs ran that the enqueuer never saw acknowledged (enqueues given up at the end)\n", rep.strangers)
	}

	verdict := func(bad bool) string {
		if bad {
			return "FAIL"
		}
		return "ok"
	}
	fmt.Fprintf(w, "\n  %-4s lost jobs: %d\n", verdict(len(rep.lost) > 0), len(rep.lost))
	for i, id := range rep.lost {
		if i == 20 {
			fmt.Fprintf(w, "         ... and %d more\n", len(rep.lost)-20)
			break
		}
		fmt.Fprintf(w, "         %s: never answered 200, in no queue state\n", id)
	}

	byKill, byAck := 0, 0
	var ackIDs []string
	for _, d := range rep.dups {
		switch {
		case d.Excused && d.ByAck:
			byAck++
			ackIDs = append(ackIDs, d.ID)
		case d.Excused:
			byKill++
		}
	}
	fmt.Fprintf(w, "  %-4s jobs run more often than at-least-once allows: %d\n", verdict(rep.unexcused() > 0), rep.unexcused())
	fmt.Fprintf(w, "         ran again (or queued to) after a kill of their worker mid-job: %d (%d kills)\n", byKill, rep.kills)
	if byAck > 0 {
		if len(ackIDs) > 5 {
			ackIDs = append(ackIDs[:5], "...")
		}
		fmt.Fprintf(w, "         ran again (or queued to) after asynq lost its acknowledgement in a Redis outage: %d %v\n", byAck, ackIDs)
		fmt.Fprintf(w, "           (asynq v0.26 retries a failed ack with a cancelled context, so never: the task stays active\n"+
			"           until its lease runs out and is run again; at-least-once, but not a kill)\n")
	}
	shown := 0
	for _, d := range rep.dups {
		if d.Excused || shown == 20 {
			continue
		}
		shown++
		fmt.Fprintf(w, "         %s: %d runs%s: %s\n", d.ID, len(d.Runs), queuedNote(d.Queued), d.Why)
		for _, q := range d.Runs {
			fmt.Fprintf(w, "           run at %s, answered at %s, connection %d\n",
				q.Start.Format("15:04:05.000"), q.End.Format("15:04:05.000"), q.Conn)
		}
	}

	fmt.Fprintf(w, "  %-4s grants beyond the limit: %d arrivals\n", verdict(rep.overGrants() > 0), rep.overGrants())
	for _, g := range rep.grants {
		fmt.Fprintf(w, "         %-15s %6d arrivals; closest: %+.2f tokens over burst + rate*t of %s (allowance %.2f) at %s\n",
			g.Bucket, g.Arrivals, g.Worst.Excess, g.Worst.Limit, g.Worst.Allowance, g.Worst.At.Format("15:04:05.000"))
		if g.Over > 0 {
			fmt.Fprintf(w, "         %-15s %d arrivals over, in %d stretches; the worst:\n", "", g.Over, len(g.Episodes))
			es := append([]episode(nil), g.Episodes...)
			sort.Slice(es, func(i, j int) bool {
				return es[i].Worst.Excess-es[i].Worst.Allowance > es[j].Worst.Excess-es[j].Worst.Allowance
			})
			for _, e := range es[:min(len(es), 5)] {
				fmt.Fprintf(w, "         %-15s   %s to %s: %d arrivals over, worst %+.2f tokens over %s (allowance %.2f) at %s\n", "",
					e.From.Format("15:04:05.000"), e.To.Format("15:04:05.000"), e.N, e.Worst.Excess, e.Worst.Limit, e.Worst.Allowance,
					e.Worst.At.Format("15:04:05.000"))
			}
		}
	}

	fmt.Fprintf(w, "  %-4s in flight beyond in-flight=%d:", verdict(rep.flightBreaches() > 0), rep.inFlight)
	for _, f := range rep.flights {
		fmt.Fprintf(w, " %s at most %d", f.Tenant, f.Most)
		if f.Most > rep.inFlight {
			fmt.Fprintf(w, " (at %s)", f.At.Format("15:04:05.000"))
		}
		fmt.Fprint(w, ";")
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "  %-4s requests during their bucket's Retry-After or cooldown: %d\n", verdict(len(rep.pauses) > 0), len(rep.pauses))
	for i, p := range rep.pauses {
		if i == 10 {
			fmt.Fprintf(w, "         ... and %d more\n", len(rep.pauses)-10)
			break
		}
		fmt.Fprintf(w, "         %s (tenant %s) at %s, %.0f ms into the pause of %s\n",
			p.Req.ID, p.Req.Tenant, p.Req.Start.Format("15:04:05.000"), p.Req.Start.Sub(p.Window.From).Seconds()*1000, p.Cause)
	}

	fmt.Fprintf(w, "  info requests of other tenants during a 429's Retry-After: %d (DESIGN.md: refusals apply to the global bucket)\n", rep.others)

	fmt.Fprintf(w, "  %-4s archived jobs: %d\n", verdict(len(rep.archived) > 0), len(rep.archived))
	reasons := make(map[string][]string)
	for _, a := range rep.archived {
		k := numbers.ReplaceAllString(a.LastErr, "N")
		reasons[k] = append(reasons[k], a.ID)
	}
	for k, ids := range reasons {
		fmt.Fprintf(w, "         %d x %q, e.g. %s\n", len(ids), k, ids[0])
		for _, a := range rep.archived {
			if a.ID == ids[0] {
				fmt.Fprintf(w, "           %s: %s\n", a.ID, a.LastErr)
			}
		}
	}
	if rep.ok() {
		fmt.Fprintf(w, "\nevery check passed (seed %d)\n", rep.seed)
	} else {
		fmt.Fprintf(w, "\nFAILED: a check did not hold (seed %d; the schedule above reproduces the faults)\n", rep.seed)
	}
}

func queuedNote(q bool) string {
	if q {
		return " and still queued"
	}
	return ""
}

// mapLine prints a map's entries sorted by key, "a 1, b 2", or "none".
func mapLine(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// writeLogs writes the upstream's log (CSV, one request a line), the
// faults as they happened, and the report, into dir.
func (r *runState) writeLogs(dir string, rep *report) error {
	var b strings.Builder
	b.WriteString("start,end,id,tenant,status,retry_after,storm,conn\n")
	for _, q := range r.up.Requests() {
		fmt.Fprintf(&b, "%s,%s,%s,%s,%d,%d,%v,%d\n", q.Start.Format(time.RFC3339Nano), q.End.Format(time.RFC3339Nano),
			q.ID, q.Tenant, q.Status, q.RetryAfter, q.Storm, q.Conn)
	}
	if err := os.WriteFile(filepath.Join(dir, "upstream.csv"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	b.Reset()
	r.rec.mu.Lock()
	for _, e := range r.rec.events {
		fmt.Fprintf(&b, "%s +%s %s\n", e.At.Format(time.RFC3339Nano), fmtDur(e.At.Sub(r.start)), e.Text)
	}
	r.rec.mu.Unlock()
	if err := os.WriteFile(filepath.Join(dir, "events.log"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	b.Reset()
	rep.print(&b)
	return os.WriteFile(filepath.Join(dir, "report.txt"), []byte(b.String()), 0o644)
}
