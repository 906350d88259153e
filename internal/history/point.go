// Package history keeps the last hour of each limit in the limiter's Redis,
// written by the workers and read by the dashboard and sluice inspect: a
// fixed-size ring of steps per job type, each step the sum over the
// workers that wrote it. Nothing grows: a ring holds Slots steps and
// expires when no worker writes it.
package history

import "time"

// Default ring: 120 steps of 30 s, the last hour.
const (
	DefaultStep = 30 * time.Second
	Slots       = 120
)

// Point is one step of one job type's history, summed over the workers
// that wrote it. Counts are over the step; Waiting is summed over the
// workers' readings at the step's end; Queued, Limit and Effective are
// the fleet's (the largest reading of the step).
type Point struct {
	At        time.Time `json:"t"`               // the step's start
	Grants    float64   `json:"grants"`          // handler runs (jobs that had their turn)
	Done      float64   `json:"done"`            // handlers that succeeded
	Archived  float64   `json:"archived"`        // jobs archived in the workers' hands
	Refused   float64   `json:"refused"`         // upstream 429/503 answers (jobs sent back for them)
	Cooldowns float64   `json:"cooldowns"`       // cooldowns put on a bucket after them
	Waiting   float64   `json:"waiting"`         // jobs waiting in workers for their turn, at the step's end
	Queued    float64   `json:"queued"`          // jobs queued in the type's queues (pending, scheduled, retry)
	Limit     float64   `json:"limit_per_s"`     // the limit on the type's rate per second: its global bucket's with a key template and a global limit, else its first limit's (per key for a key template)
	Effective float64   `json:"effective_per_s"` // its effective rate per second when it adapts; 0 if it does not
	Workers   int       `json:"workers"`         // workers that wrote the step
}
