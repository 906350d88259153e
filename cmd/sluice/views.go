package main

import (
	"time"

	"github.com/sluicehq/sluice/internal/history"
)

// bucketView is one bucket every job of a type takes from, as the fleet
// keeps it now, with why its effective rate is what it is: the per-key
// template, the global bucket, the type's own bucket or named limits, a
// calendar quota, an in-flight bound.
type bucketView struct {
	Name string `json:"name"`          // for people: "per key tenant:{header.sluice-key}", "global", "own", "limit tokens", "quota", "in flight"
	Kind string `json:"kind"`          // key, global, own, named, quota, in_flight
	Key  string `json:"key,omitempty"` // its bucket key in the store; absent for the per-key template
	// RatePerS is the configured rate per second (per key for the per-key
	// template; of a quota, its max over the window's length; of an
	// in-flight bound, its ceiling in slots).
	RatePerS float64 `json:"rate_per_s"`
	// EffectivePerS is what it allows now, in the same unit: an adaptive
	// bucket's effective rate, 0 while it cools down or a quota is spent,
	// an in-flight bound's slots.
	EffectivePerS float64 `json:"effective_per_s"`
	// Cause says why EffectivePerS is what it is, in words: "announced by
	// the upstream 40/s at 14:02", "lowered after 429s at 14:02", "runtime
	// limit set by alice@host", "--limit flag", "cooling down 12s after a
	// 429", "spent: 2,000 of 2,000 today; resets 00:00 UTC".
	Cause    string  `json:"cause"`
	Tokens   *int    `json:"tokens,omitempty"` // left; of an in-flight bound, its free slots
	Cooldown float64 `json:"cooldown_s,omitempty"`
	// CapacityPerS is how many of the type's jobs per second it lets run
	// now: EffectivePerS, times the keys with work for the per-key
	// template; -1 when it does not bound the rate (an unspent quota, an
	// in-flight bound with free slots).
	CapacityPerS float64 `json:"capacity_per_s"`
	Binds        bool    `json:"binds"` // this bucket is what holds the type back now
}

// historyView is a type's last hour (internal/history), oldest first; a
// step no worker wrote is absent.
type historyView struct {
	StepS  float64         `json:"step_s"`
	Points []history.Point `json:"points"`
}

// archivedView is a job asynq archived, with why.
type archivedView struct {
	ID       string    `json:"id"`
	Queue    string    `json:"queue"` // the family's name (queue.Family), not its member
	Type     string    `json:"type"`
	Reason   string    `json:"reason"` // asynq's last error
	FailedAt time.Time `json:"failed_at"`
	Link     string    `json:"link,omitempty"` // to asynqmon's view of it, with --asynqmon
}
