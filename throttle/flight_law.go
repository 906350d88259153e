package throttle

import (
	"math"
	"slices"
)

// The control law of an automatic in-flight bound (Concurrency.Auto), in
// pure functions of the fleet's state, one window of samples and now. It is
// a gradient law (Envoy's adaptive-concurrency, Netflix's Gradient) on the
// fleet's mean latency against its baseline, with slow start, AIMD on
// overload, and a bounded, jittered probe that re-measures the baseline.
// docs/adaptive.md ("In-flight bounds that follow latency") states it.

// Why an in-flight bound last moved (AdaptState.Reason of Limiter.InFlight).
const (
	flightCold     = "cold"       // no window yet: the bound is the floor (or the start)
	flightSlow     = "slow-start" // doubling while latency stays at its baseline
	flightGradient = "gradient"   // limit·(baseline·(1+buffer))/recent + headroom
	flightOverload = "overload"   // an overload answer (503, 429, timeout): limit·beta
	flightProbe    = "probe"      // two windows at probeDepth of the limit, re-measuring the baseline
)

// The law's constants (docs/adaptive.md).
const (
	// flightBuffer is the latency over the baseline taken as no queueing:
	// the bound settles near (1+flightBuffer) times the upstream's capacity,
	// plus flightHeadroom.
	flightBuffer   = 0.05
	flightHeadroom = 0.5
	// flightBaseRise is the most one probe raises the baseline.
	flightBaseRise = 0.1
	// flightDeadBand: between flightBuffer and it over the baseline the
	// limit only creeps up: a queue of a few, or a host's noise, moves
	// little.
	flightDeadBand = 0.15
	// flightSlowExit ends slow start: a window this much over the baseline
	// (more than flightBuffer, so that jitter alone does not end it).
	flightSlowExit = 0.2
	// flightGradMin and flightGradMax bound one window's gradient: the bound
	// at most halves or doubles per window.
	flightGradMin = 0.5
	flightGradMax = 2.0
	// flightBeta is the decrease on a window with overload answers.
	flightBeta = 0.75
	// flightProbeDepth is the probe's bound, as a fraction of the limit:
	// low enough to drain the queue of a limit up to a third over the
	// upstream's capacity, for two windows per period (one drains, one
	// measures): throughput dips by at most a quarter for them, about 1.5 %
	// of the period.
	flightProbeDepth = 0.75
	// flightProbeCalm postpones a probe while the latency is over the
	// baseline by this factor: in a transient (the capacity just fell) the
	// probe would still queue and measure the queue, not the upstream.
	flightProbeCalm = 1.25
	// flightProbeJitter spreads the probes: each comes after the probe
	// period times 1 ± flightProbeJitter.
	flightProbeJitter = 0.25
	// flightProbeEvery is the probe period, in windows: often enough that
	// the baseline follows the conditions of the moment (a busy host adds
	// to every latency).
	flightProbeEvery = 32
	// flightSmooth is how far one window moves the limit toward the
	// gradient's: a window's noise moves it by half.
	flightSmooth = 0.5
	// flightMinSamples is the fewest samples that close a window once its
	// interval has passed, or twice the bound if that is fewer (a bound of
	// 1 in slow start would wait 8 answers per window); after
	// flightMaxWait intervals one sample does.
	flightMinSamples = 8
	flightMaxWait    = 8
	// flightTrim is the share of a window's samples its latency is the
	// mean of: the fastest 99 %.
	flightTrim = 0.99
)

// flightState is an automatic in-flight bound as the fleet keeps it.
type flightState struct {
	limit   float64 // the learned limit, fractional
	bound   int     // the slots Hold grants now: the limit's, or the probe's
	base    float64 // baseline latency, µs: the probes' (in slow start, the least window mean)
	recent  float64 // the latest window's latency (typical), µs
	why     string
	at      int64 // µs of the last change
	slow    bool  // in slow start
	probeAt int64 // µs: when the next probe begins
	probing int   // the current window is a probe's: 0 none, 1 its first (draining what the limit let in), 2 its second (measuring)
	saved   float64
	high    int // windows in a row over the dead band: one alone (a host's stall) lowers nothing
}

// flightWindow is a window of samples, summed over the fleet.
type flightWindow struct {
	n, sum, over int64 // samples served, their latencies' sum (µs), overload answers
	start        int64 // µs
	held         int64 // leases held when it closed: a bound not used is not raised
	// hist counts the samples by latency bucket (latBucket), for typical.
	hist map[int]int64
}

// latStep is the ratio of one latency bucket to the next: 2 %.
const latStep = 1.02

// latBucket is the bucket of a latency of us µs.
func latBucket(us int64) int {
	return int(math.Floor(math.Log(float64(max(us, 1))) / math.Log(latStep)))
}

// latOf is the latency a bucket stands for, µs: its middle.
func latOf(b int) float64 { return math.Pow(latStep, float64(b)+0.5) }

// typical is w's latency, µs: the mean of its fastest flightTrim of
// samples, from its buckets (the mean if it has none). The mean follows
// the queue as Little's law says (a median would not move until half the
// requests queue), and leaving out the slowest few keeps a stalled host's
// answers from pulling the bound down.
func (w flightWindow) typical() float64 {
	total := int64(0)
	for _, c := range w.hist {
		total += c
	}
	if total == 0 {
		if w.n == 0 {
			return 0
		}
		return float64(w.sum) / float64(w.n)
	}
	bs := make([]int, 0, len(w.hist))
	for b := range w.hist {
		bs = append(bs, b)
	}
	slices.Sort(bs)
	keep := max(1, int64(math.Ceil(float64(total)*flightTrim)))
	n, sum := int64(0), 0.0
	for _, b := range bs {
		c := min(w.hist[b], keep-n)
		n += c
		sum += float64(c) * latOf(b)
		if n == keep {
			break
		}
	}
	return sum / float64(n)
}

// flightParams are one semaphore's bounds and window.
type flightParams struct {
	floor, ceiling float64
	interval       int64 // µs
	minSamples     int64 // that close a window: minSamples(bound)
}

// minSamples is the fewest samples that close a window of a bound.
func minSamples(bound int) int64 { return int64(min(flightMinSamples, max(2, 2*bound))) }

// coldFlight is the state of a bound no window has moved: at the floor, in
// slow start.
func coldFlight(p flightParams, now int64) flightState {
	return flightState{limit: p.floor, bound: int(p.floor), why: flightCold, at: now, slow: true}
}

// due reports whether w closes at now.
func (w flightWindow) due(now int64, p flightParams) bool {
	age := now - w.start
	return (age >= p.interval && (w.n >= p.minSamples || w.over > 0)) ||
		(age >= flightMaxWait*p.interval && w.n > 0)
}

// probeBase is the baseline after a probe measured m: m if lower (the
// upstream got faster, or the baseline was taken in a queue); else the
// average, but at most flightBaseRise over the last one, since a probe
// that measured much more was most likely disturbed (the upstream's
// capacity fell while it ran: the queue it measured is the one the bound
// must drain, not the upstream's own latency).
func probeBase(base, m float64) float64 {
	if m <= base || base == 0 {
		return m
	}
	return math.Min((base+m)/2, base*(1+flightBaseRise))
}

// step moves s by window w, closed at now; jitter, from 0 to 1, places the
// next probe. The bound never leaves [floor, ceiling].
func (s *flightState) step(w flightWindow, now int64, p flightParams, jitter float64) {
	clamp := func(x float64) float64 { return math.Min(math.Max(x, p.floor), p.ceiling) }
	s.limit = clamp(s.limit)
	nextProbe := func() int64 {
		f := 1 + flightProbeJitter*(2*jitter-1)
		return now + int64(float64(flightProbeEvery*p.interval)*f)
	}
	var mean float64
	if w.n > 0 {
		mean = w.typical()
		s.recent = mean
	}
	set := func(limit float64, why string) {
		s.limit, s.why, s.at = clamp(limit), why, now
	}
	switch {
	case s.probing == 1:
		// The probe's first window drains what the limit let in: its
		// answers waited behind more than the probe lets through.
		s.probing = 2
	case s.probing == 2:
		// The probe's second window, with less queued: its latency is the
		// upstream's under the conditions of the moment (the baseline,
		// probeBase), and the limit comes back to where it was.
		s.probing = 0
		// A probe that still measured a queue (over the calm factor) ran
		// while the capacity fell: what it saw is the queue the bound must
		// drain, not the upstream's own latency, and the baseline stays
		// (raised, it would settle the bound a slot or more over the new
		// capacity). At the floor there is nothing left to drain: what it
		// measures is the upstream's, and the baseline follows it there.
		if w.n > 0 && w.over == 0 && (mean <= s.base*flightProbeCalm || s.saved <= p.floor) {
			s.base = probeBase(s.base, mean)
		}
		set(s.saved, flightProbe)
		s.probeAt = nextProbe()
	case w.over > 0:
		s.slow = false
		set(s.limit*flightBeta, flightOverload)
	case w.n == 0:
	case s.base == 0:
		// The first window, at the floor: its mean is the baseline.
		s.base = mean
		s.probeAt = nextProbe()
		set(s.limit, s.why)
	default:
		// A bound the fleet did not fill when the window closed says
		// nothing of a larger one: it may fall, not rise (as TCP does not
		// grow a window it does not use). The report that closes a window
		// comes from a release, whose slot a waiter has yet to take: an
		// eighth (at least one) short of the bound is full.
		used := float64(w.held) >= float64(s.bound)*7/8-1
		if s.slow {
			if mean <= s.base*(1+flightSlowExit) {
				s.base = math.Min(s.base, mean)
				s.high = 0
				if used {
					set(s.limit*2, flightSlow)
				}
				break
			}
			if s.high == 0 && mean <= s.base*2 {
				s.high = 1 // one slow window (a host's stall) does not end slow start
				break
			}
			s.slow = false
		}
		g := math.Min(math.Max(s.base*(1+flightBuffer)/mean, flightGradMin), flightGradMax)
		// Under the tolerance nothing queues: room to climb, by the square
		// root of the limit (Envoy's headroom); over it, half a slot.
		head := flightHeadroom
		if mean <= s.base*(1+flightBuffer) {
			head = math.Max(head, math.Sqrt(s.limit)/2)
		}
		next := s.limit + flightSmooth*(s.limit*g+head-s.limit)
		if next > s.limit && !used {
			next = s.limit
		}
		switch over := mean > s.base*(1+flightDeadBand); {
		case mean > s.base*(1+flightBuffer) && !over:
			// A short queue, or noise: creep up by an eighth of a slot, so that
			// a bound below the knee on a noisy host still finds it.
			next = s.limit
			if used {
				next += flightSmooth * flightHeadroom / 2
			}
			s.high = 0
		case over && s.high == 0 && mean <= s.base*flightProbeCalm:
			// One window over the band: a queue that lasts shows again in
			// the next; a host's stall does not. (A jump over the calm
			// factor, the capacity falling, is followed at once.)
			next = s.limit
			s.high = 1
		case over:
			s.high++
		default:
			s.high = 0
		}
		set(next, flightGradient)
		if now >= s.probeAt && mean <= s.base*flightProbeCalm {
			s.probing, s.saved = 1, s.limit
			s.why = flightProbe
		}
	}
	s.bound = int(s.limit)
	if s.probing > 0 {
		s.bound = int(math.Max(p.floor, math.Floor(s.limit*flightProbeDepth)))
	}
	s.bound = max(s.bound, int(p.floor), 1)
}
