package main

import (
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"
)

// Tolerances of the checks; docs/reliability.md explains each.
const (
	// baseJitter is the lateness allowed to any request between its grant
	// in Redis and its arrival at the upstream, on top of what the jitter
	// probe saw near it (the soak test's figure).
	baseJitter = 10 * time.Millisecond
	// prefetchLead is how long after its grant a prefetched booking may be
	// used (worker --prefetch: 1 to 20 ms).
	prefetchLead = 20 * time.Millisecond
	// jitterLookback is how far back from an arrival the probe's worst
	// lateness counts for it.
	jitterLookback = 2 * time.Second
	// applyLag is how long after `sluice set` returns the workers may still
	// grant under the old limit: "within a second", plus the longest a job
	// holds a turn it booked before (max-wait).
	applyLag = time.Second
	// pollLag replaces applyLag's second when a pub/sub message may have
	// been lost near the change (pub/sub connections killed, Redis restarted
	// or paused): the workers' periodic read of the limits, every 5 s.
	pollLag = 5 * time.Second
	// lossWindow is how near a change a lost message counts.
	lossWindow = 10 * time.Second
	// ackAllowance is how long after its request ended a job may still be
	// unacknowledged (the worker has not told asynq it is done), so that a
	// kill of its worker then excuses running it again; Redis outages in
	// between lengthen it by their length.
	ackAllowance = 3 * time.Second
	// pauseGrace is how long after a 429 (or after `sluice cooldown`
	// returns, plus max-wait) requests may still arrive: those already sent
	// or granted.
	pauseGrace = 300 * time.Millisecond
)

// lateness reports the worst scheduling lateness seen in [from, to].
type lateness func(from, to time.Time) time.Duration

// phase is a limit in force from From until To (zero To: until the end).
type phase struct {
	From, To time.Time
	Limit    rateBurst
}

// phasesOf turns the limit changes into the phases of one bucket (pick
// chooses which): the workers' own limit from the start, each change's
// limit from the moment its command started, the limit it replaced until
// applyLag (or pollLag) plus max-wait after the command returned. A failed
// command's limit counts from its start and the old one's never ends: the
// check takes the higher of the two.
func phasesOf(base bounds, changes []limitChange, losses []time.Time, pick func(bounds) rateBurst) []phase {
	ps := []phase{{Limit: pick(base)}}
	open := []int{0} // phases not yet ended
	for _, c := range changes {
		if !c.Failed {
			lag := applyLag
			for _, l := range losses {
				if l.After(c.Start.Add(-lossWindow)) && l.Before(c.End.Add(time.Second)) {
					lag = pollLag
				}
			}
			for _, i := range open {
				ps[i].To = c.End.Add(lag + base.maxWait) // every spec of the run has base's max-wait
			}
			open = open[:0]
		}
		ps = append(ps, phase{From: c.Start, Limit: pick(c.Bounds)})
		open = append(open, len(ps)-1)
	}
	return ps
}

// in reports whether the phase overlaps [from, to].
func (p phase) in(from, to time.Time) bool {
	return !p.From.After(to) && (p.To.IsZero() || p.To.After(from))
}

// highest is the highest rate and burst in force at any moment of [from, to].
func highest(ps []phase, from, to time.Time) rateBurst {
	var rb rateBurst
	for _, p := range ps {
		if p.in(from, to) {
			rb.Rate = max(rb.Rate, p.Limit.Rate)
			rb.Burst = max(rb.Burst, p.Limit.Burst)
		}
	}
	return rb
}

// grantResult is the grant check of one bucket.
type grantResult struct {
	Bucket   string
	Arrivals int
	// Over counts arrivals beyond burst + rate·t by more than their
	// allowance; First is the first of them.
	Over  int
	First overGrant
	// Worst is the arrival closest to (or furthest past) its allowance.
	Worst overGrant
	// Episodes are the stretches of arrivals over (a second apart or more
	// starts a new one).
	Episodes []episode
}

// episode is a stretch of over-grants: N arrivals from From to To, the
// worst Worst tokens over.
type episode struct {
	From, To time.Time
	N        int
	Worst    overGrant
}

// overGrant is one arrival and how far it was beyond the bucket.
type overGrant struct {
	At        time.Time
	Excess    float64 // tokens beyond burst + rate·t (≤ 0: within it)
	Allowance float64 // tokens of jitter allowed here
	Limit     rateBurst
}

// checkGrants checks that the arrivals at (every request that reached the
// upstream: each was a grant, whatever it was answered) never exceed, in
// any span, the burst plus rate·t of the highest limit in force in that
// span, by more than the jitter allowance.
//
// It runs a token bucket that may go into debt over the arrivals, refilled
// at the highest rate in force since the previous arrival and capped at the
// highest burst, and full again whenever a new limit begins (a runtime
// change may start from a full bucket). With one limit throughout, the
// debt after arrival j is the largest excess of any window ending at j
// (GCRA's equivalence). The allowance at an arrival is the rate times the
// lateness a request may have there: baseJitter, prefetchLead, and the
// worst the probe saw in the preceding jitterLookback.
func checkGrants(bucket string, at []time.Time, ps []phase, late lateness) grantResult {
	res := grantResult{Bucket: bucket, Arrivals: len(at), Worst: overGrant{Excess: math.Inf(-1)}}
	var tokens float64
	for j, a := range at {
		if j == 0 {
			tokens = highest(ps, a, a).Burst
		} else {
			prev := at[j-1]
			lim := highest(ps, prev, a)
			tokens = math.Min(lim.Burst, tokens+lim.Rate*a.Sub(prev).Seconds())
			for _, p := range ps {
				if p.From.After(prev) && !p.From.After(a) {
					tokens = lim.Burst
				}
			}
		}
		tokens--
		lim := highest(ps, a, a)
		g := overGrant{
			At:        a,
			Excess:    -tokens,
			Allowance: lim.Rate * (baseJitter + prefetchLead + late(a.Add(-jitterLookback), a)).Seconds(),
			Limit:     lim,
		}
		if g.Excess-g.Allowance > res.Worst.Excess-res.Worst.Allowance {
			res.Worst = g
		}
		if g.Excess > g.Allowance {
			if res.Over == 0 {
				res.First = g
			}
			res.Over++
			n := len(res.Episodes)
			if n == 0 || a.Sub(res.Episodes[n-1].To) >= time.Second {
				res.Episodes = append(res.Episodes, episode{From: a, Worst: g})
				n++
			}
			e := &res.Episodes[n-1]
			e.To, e.N = a, e.N+1
			if g.Excess-g.Allowance > e.Worst.Excess-e.Worst.Allowance {
				e.Worst = g
			}
		}
	}
	return res
}

// arrivalsOf returns the arrival times of the requests keep accepts, sorted.
func arrivalsOf(rs []request, keep func(request) bool) []time.Time {
	var at []time.Time
	for _, r := range rs {
		if keep(r) {
			at = append(at, r.Start)
		}
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	return at
}

// dup is a job answered 200 more than once (or answered and still queued
// at the end, to run again).
type dup struct {
	ID      string
	Runs    []request
	Queued  bool   // still queued at the end, after a run
	Excused bool   // every run after the first is excused by a kill (or a lost ack)
	ByAck   bool   // asynq lost an acknowledgement of the job: see lostAck
	Why     string // the kills that excuse it, or what is not excused
}

// checkRuns finds the jobs run more often than at-least-once allows. A job
// may run again only when the worker that ran it was killed before asynq
// heard it was done: for each run after the first (and for a job still
// queued after it ran), the previous run's worker — the one whose
// connection it came on — must have been killed after that run began,
// before the next began, and no later than ackAllowance (plus any Redis
// outage) after that run ended. Apart from those, a run is excused (ByAck)
// when asynq logged that it lost an acknowledgement of the job before it:
// asynq's own at-least-once, not the fleet's doing (see lostAck).
func checkRuns(rs []request, queued map[string]bool, kills []kill, outages []span, acks map[string][]time.Time) []dup {
	runs := make(map[string][]request)
	for _, r := range rs {
		if r.Status == http.StatusOK {
			runs[r.ID] = append(runs[r.ID], r)
		}
	}
	var dups []dup
	for id, rr := range runs {
		if len(rr) < 2 && !queued[id] {
			continue
		}
		sort.Slice(rr, func(i, j int) bool { return rr[i].Start.Before(rr[j].Start) })
		d := dup{ID: id, Runs: rr, Queued: queued[id], Excused: true}
		next := func(i int) time.Time {
			if i+1 < len(rr) {
				return rr[i+1].Start
			}
			return time.Unix(1<<40, 0) // still queued: it would run after the end
		}
		last := len(rr) - 1
		if !d.Queued {
			last--
		}
		for i := 0; i <= last; i++ {
			k, ok := excuse(rr[i], next(i), kills, outages)
			if !ok && slices.ContainsFunc(acks[id], func(a time.Time) bool { return a.Before(next(i)) }) {
				d.ByAck = true
				if d.Why != "" {
					d.Why += "; "
				}
				d.Why += "asynq lost an acknowledgement of it before"
				continue
			}
			if !ok {
				d.Excused = false
				d.Why = "run " + rr[i].Start.Format("15:04:05.000") + " was followed by another with no kill of its worker"
				break
			}
			if d.Why != "" {
				d.Why += "; "
			}
			d.Why += k.Worker + " (pid " + itoa(k.Pid) + ") killed at " + k.At.Format("15:04:05.000")
		}
		dups = append(dups, d)
	}
	sort.Slice(dups, func(i, j int) bool { return dups[i].ID < dups[j].ID })
	return dups
}

// excuse finds a kill of run's worker that lets the job run again at next.
func excuse(run request, next time.Time, kills []kill, outages []span) (kill, bool) {
	for _, k := range kills {
		if k.Known && !slices.Contains(k.Conns, run.Conn) {
			continue
		}
		if k.At.Before(run.Start) || k.At.After(next) {
			continue
		}
		deadline := run.End.Add(ackAllowance)
		for _, o := range outages {
			if o.To.After(run.End) && o.From.Before(k.At) {
				deadline = deadline.Add(o.To.Sub(o.From))
			}
		}
		if !k.At.After(deadline) {
			return k, true
		}
	}
	return kill{}, false
}

// flightResult is the in-flight check of one tenant.
type flightResult struct {
	Tenant string
	Most   int       // the most of its requests in progress at once
	At     time.Time // when
}

// checkInFlight counts, per tenant, the requests in progress at once at the
// upstream (from arrival to the answer's being written). A request's end
// comes before an arrival at the same instant.
func checkInFlight(rs []request) []flightResult {
	type edge struct {
		at    time.Time
		delta int
	}
	by := make(map[string][]edge)
	for _, r := range rs {
		end := r.End
		if end.IsZero() {
			end = r.Start
		}
		by[r.Tenant] = append(by[r.Tenant], edge{r.Start, 1}, edge{end, -1})
	}
	var out []flightResult
	for tn, es := range by {
		sort.Slice(es, func(i, j int) bool {
			if es[i].at.Equal(es[j].at) {
				return es[i].delta < es[j].delta
			}
			return es[i].at.Before(es[j].at)
		})
		res := flightResult{Tenant: tn}
		n := 0
		for _, e := range es {
			n += e.delta
			if n > res.Most {
				res.Most, res.At = n, e.at
			}
		}
		out = append(out, res)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	return out
}

// pauseBreach is a request that arrived while its bucket was paused.
type pauseBreach struct {
	Req    request
	Window span
	Cause  string
}

// window is a pause of one tenant's bucket.
type window struct {
	span
	tenant, cause string
}

// checkPauses finds requests that arrived while their tenant's bucket was
// paused: after a 429 to one of the tenant's requests, for its Retry-After,
// from pauseGrace after the answer (the requests already sent); after
// `sluice cooldown`, from pauseGrace plus max-wait after the command
// returned (a job may hold a turn booked before) until the cooldown ends.
// Lateness the probe saw near a request is added to the grace.
//
// It also counts, apart, the requests of other tenants during a 429's
// Retry-After: an upstream's refusals apply to the global bucket (unless
// adapt=key), so with global= they pause every tenant; the report shows the
// figure without failing on it.
func checkPauses(rs []request, cds []cooldown, maxWait time.Duration, late lateness) (breaches []pauseBreach, others int) {
	var own, all []window
	for _, r := range rs {
		if r.Status == http.StatusTooManyRequests && r.RetryAfter > 0 && !r.End.IsZero() {
			w := window{span{r.End.Add(pauseGrace), r.End.Add(time.Duration(r.RetryAfter) * time.Second)},
				r.Tenant, "429 with Retry-After " + itoa(r.RetryAfter) + " to " + r.ID + " at " + r.End.Format("15:04:05.000")}
			own = append(own, w)
			w.tenant = ""
			all = append(all, w)
		}
	}
	for _, c := range cds {
		own = append(own, window{span{c.End.Add(pauseGrace + maxWait), c.Start.Add(c.For)},
			c.Tenant, "sluice cooldown tenant:" + c.Tenant + " " + c.For.String() + " at " + c.Start.Format("15:04:05.000")})
	}
	own, all = merge(own), merge(all)
	for _, r := range rs {
		slack := late(r.Start.Add(-jitterLookback), r.Start)
		inside := func(w window) bool { return r.Start.After(w.From.Add(slack)) && r.Start.Before(w.To) }
		hit := false
		for _, w := range own {
			if w.tenant == r.Tenant && inside(w) {
				breaches = append(breaches, pauseBreach{Req: r, Window: w.span, Cause: w.cause})
				hit = true
				break
			}
		}
		if !hit && slices.ContainsFunc(all, inside) {
			others++
		}
	}
	return breaches, others
}

// merge joins the overlapping windows of each tenant: a storm makes hundreds.
func merge(ws []window) []window {
	sort.Slice(ws, func(i, j int) bool {
		if ws[i].tenant != ws[j].tenant {
			return ws[i].tenant < ws[j].tenant
		}
		return ws[i].From.Before(ws[j].From)
	})
	var out []window
	for _, w := range ws {
		if n := len(out); n > 0 && out[n-1].tenant == w.tenant && !w.From.After(out[n-1].To) {
			out[n-1].To = latest(out[n-1].To, w.To)
			continue
		}
		out = append(out, w)
	}
	return out
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func itoa(n int) string { return strconv.Itoa(n) }
