package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// faultKind names one kind of fault; the names are those of --faults.
type faultKind string

const (
	faultKill     faultKind = "kill"     // SIGKILL a worker (SIGSTOP first, to see its connections), restart it later
	faultPause    faultKind = "pause"    // SIGSTOP Redis, SIGCONT it later
	faultRestart  faultKind = "restart"  // SIGKILL Redis and start it again on its port, from its AOF
	faultPubSub   faultKind = "pubsub"   // CLIENT KILL TYPE pubsub
	faultFlush    faultKind = "flush"    // SCRIPT FLUSH
	faultStorm    faultKind = "storm"    // the upstream answers every request 429 with a Retry-After
	faultQuota    faultKind = "quota"    // the upstream's own quota moves, then comes back
	faultLower    faultKind = "lower"    // sluice set a lower limit, sluice unset it later
	faultRaise    faultKind = "raise"    // sluice set a higher limit, sluice unset it later
	faultCooldown faultKind = "cooldown" // sluice cooldown on one tenant's bucket
)

// allFaults is every kind, in the order --help lists them.
var allFaults = []faultKind{
	faultKill, faultPause, faultRestart, faultPubSub, faultFlush,
	faultStorm, faultQuota, faultLower, faultRaise, faultCooldown,
}

// resource is what a kind of fault holds while it lasts: two faults on one
// resource never overlap in the plan (a Redis is not restarted while
// paused, a limit is not lowered while raised).
func (k faultKind) resource() string {
	switch k {
	case faultPause, faultRestart, faultPubSub, faultFlush:
		return "redis"
	case faultLower, faultRaise:
		return "limit"
	}
	return string(k) // kill holds one worker: see plan
}

// fault is one planned fault: at At from the start of the run, lasting For.
type fault struct {
	At     time.Duration
	Kind   faultKind
	For    time.Duration // 0 for a fault that is over at once
	Worker int           // kill: the worker, 0-based
	Tenant string        // cooldown: whose bucket
	Value  float64       // storm: Retry-After in seconds; quota: the upstream's rate
}

func (f fault) String() string {
	switch f.Kind {
	case faultKill:
		return fmt.Sprintf("SIGKILL worker%d, restart it %v later", f.Worker+1, f.For)
	case faultPause:
		return fmt.Sprintf("SIGSTOP redis for %v", f.For)
	case faultRestart:
		return fmt.Sprintf("restart redis (SIGKILL, down %v)", f.For)
	case faultPubSub:
		return "CLIENT KILL TYPE pubsub"
	case faultFlush:
		return "SCRIPT FLUSH"
	case faultStorm:
		return fmt.Sprintf("429 storm for %v, Retry-After %gs", f.For, f.Value)
	case faultQuota:
		return fmt.Sprintf("upstream quota %g/s for %v", f.Value, f.For)
	case faultLower:
		return fmt.Sprintf("sluice set a lower limit for %v, then unset", f.For)
	case faultRaise:
		return fmt.Sprintf("sluice set a higher limit for %v, then unset", f.For)
	case faultCooldown:
		return fmt.Sprintf("sluice cooldown tenant:%s %v", f.Tenant, f.For)
	}
	return string(f.Kind)
}

// planWarmup is how long the fleet runs before the first fault, and
// planQuiet how long before the end of the chaos phase the last one starts.
const (
	planWarmup = 2 * time.Second
	planQuiet  = 2 * time.Second
)

// planFaults draws the fault schedule from seed alone (and the run's shape:
// its duration, fleet size, the kinds allowed and the mean gap between
// faults): the same arguments always give the same schedule. Faults come at
// exponentially distributed gaps; each is drawn among the allowed kinds whose
// resource is free, and at least one worker is always up.
func planFaults(seed uint64, duration time.Duration, workers int, kinds []faultKind, gap time.Duration) []fault {
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	busy := make(map[string]time.Duration) // resource → free again from
	down := make([]time.Duration, workers) // worker → up again from
	var plan []fault
	for t := planWarmup; ; {
		t += time.Duration(math.Min(rng.ExpFloat64(), 4) * float64(gap))
		t = max(t, plan0(plan)+100*time.Millisecond)
		if t >= duration-planQuiet {
			return plan
		}
		var free []faultKind
		var upWorkers []int
		for i, until := range down {
			if until <= t {
				upWorkers = append(upWorkers, i)
			}
		}
		for _, k := range kinds {
			if busy[k.resource()] > t || (k == faultKill && len(upWorkers) < 2) {
				continue
			}
			free = append(free, k)
		}
		if len(free) == 0 {
			continue
		}
		f := fault{At: t, Kind: free[rng.IntN(len(free))]}
		between := func(lo, hi time.Duration) time.Duration {
			return (lo + time.Duration(rng.Int64N(int64(hi-lo)))).Round(10 * time.Millisecond)
		}
		switch f.Kind {
		case faultKill:
			f.Worker = upWorkers[rng.IntN(len(upWorkers))]
			f.For = between(500*time.Millisecond, 3*time.Second)
			down[f.Worker] = t + f.For + time.Second
		case faultPause:
			f.For = between(300*time.Millisecond, 4*time.Second)
		case faultRestart:
			f.For = between(0, 1500*time.Millisecond)
		case faultStorm:
			f.For = between(time.Second, 4*time.Second)
			f.Value = float64(2 + rng.IntN(3))
		case faultQuota:
			f.For = between(5*time.Second, 15*time.Second)
			f.Value = []float64{25, 35, 60}[rng.IntN(3)]
		case faultLower, faultRaise:
			f.For = between(3*time.Second, 12*time.Second)
		case faultCooldown:
			f.For = between(2*time.Second, 5*time.Second)
			f.Tenant = tenants[rng.IntN(len(tenants))].name
		}
		if f.Kind != faultKill {
			// A second on top, so that one fault's recovery is done before
			// the next on its resource begins.
			busy[f.Kind.resource()] = t + f.For + time.Second
		}
		plan = append(plan, f)
	}
}

// plan0 is when the last fault of plan starts, 0 for none.
func plan0(plan []fault) time.Duration {
	if len(plan) == 0 {
		return 0
	}
	return plan[len(plan)-1].At
}

// printPlan writes the schedule, one fault a line.
func printPlan(w io.Writer, plan []fault) {
	for _, f := range plan {
		fmt.Fprintf(w, "  %9s  %s\n", "+"+fmtDur(f.At), f)
	}
	if len(plan) == 0 {
		fmt.Fprintln(w, "  (no fault: the run is too short, or --faults is empty)")
	}
}

// tenant is one of the workload's tenants and its share of the jobs.
type tenant struct {
	name  string
	share float64
}

// tenants send jobs in these shares, each under its own key
// (the task's sluice-key header) and all through the global bucket.
var tenants = []tenant{{"acme", 0.55}, {"globex", 0.30}, {"initech", 0.15}}

// workloadTick is how often the enqueuer enqueues the jobs due.
const workloadTick = 100 * time.Millisecond

// workload draws, tick by tick, how many jobs each tenant enqueues: rate
// jobs a second in the tenants' shares, plus now and then a burst of 50 to
// 150 jobs from one tenant. It is drawn from seed alone.
type workload struct {
	rng  *rand.Rand
	rate float64
	owed []float64 // fractional jobs carried to the next tick, by tenant
}

func newWorkload(seed uint64, rate float64) *workload {
	return &workload{rng: rand.New(rand.NewPCG(seed, 0x10ad)), rate: rate, owed: make([]float64, len(tenants))}
}

// next returns how many jobs each tenant enqueues in the next tick.
func (w *workload) next() []int {
	n := make([]int, len(tenants))
	for i, tn := range tenants {
		w.owed[i] += w.rate * tn.share * workloadTick.Seconds()
		n[i] = int(w.owed[i])
		w.owed[i] -= float64(n[i])
	}
	// About one burst every 25 s.
	if w.rng.Float64() < workloadTick.Seconds()/25 {
		n[w.rng.IntN(len(tenants))] += 50 + w.rng.IntN(101)
	}
	return n
}

// kindsOf parses --faults: "all", "none", or names separated by commas.
func kindsOf(s string) ([]faultKind, error) {
	switch s {
	case "all":
		return slices.Clone(allFaults), nil
	case "none", "":
		return nil, nil
	}
	var kinds []faultKind
	for _, name := range splitList(s) {
		k := faultKind(name)
		if !slices.Contains(allFaults, k) {
			return nil, fmt.Errorf("--faults: unknown fault %q (known: %s)", name, joinKinds(allFaults))
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds, nil
}

func joinKinds(ks []faultKind) string {
	var s string
	for i, k := range ks {
		if i > 0 {
			s += ","
		}
		s += string(k)
	}
	return s
}

// fmtDur prints d to the millisecond, "12.345s".
func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.3fs", d.Seconds())
}
