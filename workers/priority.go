package workers

import (
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
)

// This file is where a job's buckets get their throttle.Share: under Fair,
// Global is shared among the keys (docs/fairness.md); under Priorities, the
// shared bucket is divided among the jobs' priority levels too
// (docs/priorities.md). Both are one Share on one bucket, decided in the
// same script call as the job's turn.

// checkPriorities checks pol's priority fields, reporting each fault to bad.
func checkPriorities(pol Policy, bad func(format string, args ...any)) {
	switch f := pol.PriorityFloor; {
	case !pol.Priorities:
		bad("PriorityFloor is set without Priorities")
	case f != 0 && !(f >= 0.001 && f <= 0.5):
		bad("PriorityFloor %g is not between 0.001 and 0.5", f)
	}
	if !pol.Fair && (pol.FairHorizon < 0 || pol.FairHorizon > throttle.MaxShareHorizon) {
		bad("FairHorizon %v is not between 0 and %v", pol.FairHorizon, throttle.MaxShareHorizon)
	}
}

// shared is the policy of the bucket p shares under Fair or Priorities:
// Global if set, else its first limit.
func (p *policy) shared() throttle.Policy {
	if p.global != nil {
		return p.global
	}
	return p.limits[0].Limit
}

// share sets the Share of the bucket of bs (what buckets built for a job of
// key with meta m) that p shares, if it shares one: Global under Fair, with
// the key as its tenant; else under Priorities Global if set (one tenant,
// the global bucket's name), else the job's own bucket (the key its tenant).
// Under Priorities the job's level is its priority.
func (p *policy) share(bs []throttle.Bucket, key string, m queue.Meta) {
	if !p.Fair && !p.Priorities {
		return
	}
	sh := &throttle.Share{Tenant: key, Horizon: p.FairHorizon}
	at := 0
	if p.global != nil {
		at = len(bs) - 1
		if p.Fair {
			sh.Weight = p.Weights[key]
		} else {
			sh.Tenant = globalName
		}
	}
	if p.Priorities {
		sh.Priority, sh.Floor = m.PriorityOr(), p.PriorityFloor
	}
	bs[at].Share = sh
}
