package main

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/limitspec"
	"github.com/sluicehq/sluice/throttle"
)

// The limits the run uses, in the worker's --limit grammar: every job is an
// http:request of one of the tenants, keyed by its sluice-key header, all
// sharing a global bucket (fair shares are on by default with key= and
// global=; adapt is on by default for a token bucket), at most inFlight jobs
// of one tenant running at once. A "lower" fault sets lowSpec at runtime, a
// "raise" highSpec; both are unset after.
const (
	keyTemplate = "tenant:{header.sluice-key}"
	common      = ",key=" + keyTemplate + ",in-flight=4,max-wait=500ms"
	baseSpec    = "http:request=100/s,burst=10,global=60/s:6" + common
	lowSpec     = "http:request=30/s,burst=3,global=20/s:2" + common
	highSpec    = "http:request=150/s,burst=15,global=90/s:9" + common
	jobType     = "http:request"
	// upstreamQuota is the rate the upstream allows when no quota fault
	// moves it: below the global limit, so the fleet adapts to it.
	upstreamQuota = 45.0
)

// bounds are the figures of one limit spec the checks compare arrivals with.
type bounds struct {
	spec     string
	tenant   rateBurst // each tenant's bucket
	global   rateBurst // the bucket every tenant shares
	inFlight int
	maxWait  time.Duration
}

// rateBurst is a token bucket: Rate a second, holding Burst.
type rateBurst struct {
	Rate  float64
	Burst float64
}

func (rb rateBurst) String() string { return fmt.Sprintf("%g/s burst %g", rb.Rate, rb.Burst) }

// boundsOf parses spec into the figures the checks need.
func boundsOf(spec string) (bounds, error) {
	sp, err := limitspec.Parse(spec)
	if err != nil {
		return bounds{}, err
	}
	tb, ok := sp.Limit.(throttle.Limit)
	global, hasGlobal := sp.Global.(throttle.Limit)
	if !ok || !hasGlobal {
		return bounds{}, fmt.Errorf("%q: want a token bucket with global=", spec)
	}
	return bounds{
		spec:     spec,
		tenant:   perSecond(tb),
		global:   perSecond(global),
		inFlight: sp.InFlight,
		maxWait:  sp.MaxWait,
	}, nil
}

func perSecond(l throttle.Limit) rateBurst {
	p := l.Period
	if p == 0 {
		p = time.Second
	}
	return rateBurst{Rate: l.Rate / p.Seconds(), Burst: float64(l.Burst)}
}
