package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// perSecond is l's rate in tokens per second.
func perSecond(l throttle.Limit) float64 {
	p := l.Period
	if p == 0 {
		p = time.Second
	}
	return l.Rate / p.Seconds()
}

func poolStats(hosts []*host) []workers.Stats {
	s := make([]workers.Stats, len(hosts))
	for i, h := range hosts {
		s[i] = h.pool.Stats()
	}
	return s
}

func printHeader(out io.Writer, hosts []*host) {
	var b strings.Builder
	fmt.Fprintf(&b, "%6s  %9s  %7s  %7s  %11s ", "time", "done", "rate/s", "waiting", "re-enqueued")
	for _, h := range hosts {
		fmt.Fprintf(&b, " %7s", h.name)
	}
	fmt.Fprintln(out, b.String())
}

// printProgress prints one progress line: jobs done, the rate over the last
// interval, jobs waiting in a worker for their turn now, jobs sent back to
// the queue so far, and jobs done by each host.
func printProgress(out io.Writer, at time.Duration, s snapshot, total int, rate float64, stats []workers.Stats, hosts []*host) {
	var waiting, requeued int64
	for _, st := range stats {
		waiting += st.Waiting
		requeued += st.Requeued
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%5.0fs  %9s  %7.1f  %7d  %11d ", at.Seconds(), fmt.Sprintf("%d/%d", s.done, total), rate, waiting, requeued)
	for _, h := range hosts {
		fmt.Fprintf(&b, " %7d", s.byHost[h.name])
	}
	fmt.Fprintln(out, b.String())
}

// summary is what a run did, for the last lines of its output.
type summary struct {
	opts    options
	backend *backend
	snap    snapshot
	elapsed time.Duration // from the pools' start to their shutdown
	stats   []workers.Stats
	info    *asynq.QueueInfo
	wait    []time.Duration // per host: time its jobs waited for their turn
	waited  []uint64        // per host: jobs that took a turn
}

func (s *summary) print(out io.Writer) {
	o, snap := s.opts, s.snap
	rate, burst := perSecond(o.Limit), o.Limit.Burst
	var perHost []string
	var requeued, failed int64
	for i, st := range s.stats {
		name := hostName(i)
		perHost = append(perHost, fmt.Sprintf("%s %d", name, snap.byHost[name]))
		requeued += st.Requeued
		failed += st.Failed
	}
	once := "each once"
	if snap.calls != snap.done {
		once = fmt.Sprintf("%d ran more than once", snap.calls-snap.done)
	}

	fmt.Fprintf(out, "\nsummary (%v)\n", s.backend)
	fmt.Fprintf(out, "  done         %d of %d jobs, %s: %s\n", snap.done, o.Jobs, once, strings.Join(perHost, ", "))
	if n := len(snap.runs); n > burst {
		span := snap.runs[n-1].start.Sub(snap.runs[0].start)
		ideal := time.Duration(float64(n-burst) / rate * float64(time.Second))
		steady := float64(n-burst) / span.Seconds()
		fmt.Fprintf(out, "  elapsed      %.1fs from the first job to the last, %.1fs with start-up and shutdown\n",
			span.Seconds(), s.elapsed.Seconds())
		fmt.Fprintf(out, "  ideal        %.1fs: a burst of %d at once, then %d at %g/s\n", ideal.Seconds(), burst, n-burst, rate)
		fmt.Fprintf(out, "  rate         %.1f/s after the burst, %.0f%% of the limit of %g/s (%.1f/s with the burst)\n",
			steady, 100*steady/rate, rate, float64(n)/span.Seconds())
		if f := fullest(snap.runs, o.Limit); f <= 1+1e-3 {
			fmt.Fprintf(out, "  limit kept   no stretch of time t had more jobs granted than %d + %g·t (the fullest had %.0f%%)\n",
				burst, rate, 100*f)
		} else {
			fmt.Fprintf(out, "  OVER LIMIT   a stretch of time t had %.1f%% of the %d + %g·t jobs the limit allows\n", 100*f, burst, rate)
		}
	}
	var wait time.Duration
	var waited uint64
	for i := range s.wait {
		wait += s.wait[i]
		waited += s.waited[i]
	}
	fmt.Fprintf(out, "  waited       %.1fs in all, over %d jobs, sleeping in their worker until their turn (no polling)\n", wait.Seconds(), waited)
	fmt.Fprintf(out, "  re-enqueued  %d times: a job whose turn was over %v away went back to the queue holding it\n", requeued, o.MaxWait)
	if median, most, n := lateness(snap.runs); n > 0 {
		fmt.Fprintf(out, "               and came back to run %v after its turn (median of %d), %v at most\n",
			median.Round(time.Millisecond), n, most.Round(time.Millisecond))
	}
	q := s.info
	verdict := "nothing lost"
	if q.Archived+q.Pending+q.Scheduled+q.Retry+q.Active+q.Failed+int(failed) > 0 || snap.done != o.Jobs {
		verdict = "NOT ALL DONE"
	}
	fmt.Fprintf(out, "  queue        archived %d, failed %d, pending %d, scheduled %d, retry %d, active %d: %s (jobs had MaxRetry 0)\n",
		q.Archived, max(int(failed), q.Failed), q.Pending, q.Scheduled, q.Retry, q.Active, verdict)
}

func hostName(i int) string { return fmt.Sprintf("host-%c", 'a'+i) }

// lateness returns the median and the largest delay between a come-back's
// turn and its handler's start, over the jobs that came back holding a turn.
func lateness(runs []jobRun) (median, most time.Duration, n int) {
	var late []time.Duration
	for _, r := range runs {
		if r.ticket {
			late = append(late, max(r.start.Sub(r.turn), 0))
		}
	}
	if len(late) == 0 {
		return 0, 0, 0
	}
	slices.Sort(late)
	return late[len(late)/2], late[len(late)-1], len(late)
}

// check returns an error unless every job ran exactly once and the queue is empty.
func (s *summary) check() error {
	q := s.info
	var errs []error
	if s.snap.done != s.opts.Jobs {
		errs = append(errs, fmt.Errorf("%d of %d jobs done", s.snap.done, s.opts.Jobs))
	}
	if s.snap.calls != s.snap.done {
		errs = append(errs, fmt.Errorf("%d jobs ran more than once", s.snap.calls-s.snap.done))
	}
	if n := q.Archived + q.Pending + q.Scheduled + q.Retry + q.Active + q.Failed; n > 0 {
		errs = append(errs, fmt.Errorf("queue %s not empty: archived %d, failed %d, pending %d, scheduled %d, retry %d, active %d",
			q.Queue, q.Archived, q.Failed, q.Pending, q.Scheduled, q.Retry, q.Active))
	}
	return errors.Join(errs...)
}

// fullest returns the largest share, over every stretch of time from one
// job's turn to a later one's, of the jobs the limit allows in it (Burst +
// Rate·t) that had their turn in it: at most 1 if the limit was kept.
func fullest(runs []jobRun, limit throttle.Limit) float64 {
	turns := make([]time.Time, len(runs))
	for i, r := range runs {
		turns[i] = r.turn
	}
	slices.SortFunc(turns, time.Time.Compare)
	rate, burst := perSecond(limit), float64(limit.Burst)
	worst := 0.0
	for i := range turns {
		for j := i; j < len(turns); j++ {
			allowed := burst + rate*turns[j].Sub(turns[i]).Seconds()
			worst = max(worst, float64(j-i+1)/allowed)
		}
	}
	return worst
}
