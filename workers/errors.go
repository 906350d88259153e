package workers

import (
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

var (
	// ErrHorizon matches the error a job is archived with when it has been
	// throttled for longer than Config.Horizon (see [HorizonError]).
	ErrHorizon = errors.New("workers: throttled past the horizon")
	// ErrKey matches the error a job is archived with when its policy cannot
	// derive a bucket key from it: a field its KeyFunc needs is missing or
	// malformed. Retrying would not help.
	ErrKey = errors.New("workers: cannot derive the bucket key")
	// ErrCost matches the error a job is archived with when its cost cannot
	// be taken: a field its CostFunc reads is missing or not a whole number,
	// or the cost is less than 1 or more than a limit grants at once.
	// Retrying would not help.
	ErrCost = errors.New("workers: bad job cost")
)

// HorizonError is returned to asynq, which archives the job, when a job that
// would have to be throttled again has been throttled for longer than
// Config.Horizon: since it was first sent back, or since it was enqueued if it
// never was. It wraps asynq.SkipRetry and matches [ErrHorizon].
type HorizonError struct {
	Throttled time.Duration // how long since the job was first sent back (or enqueued)
	Horizon   time.Duration // Config.Horizon
	Wait      time.Duration // how much longer it would have had to wait; 0 if not known
}

func (e *HorizonError) Error() string {
	msg := fmt.Sprintf("workers: throttled for %v, past the %v horizon", round(e.Throttled), round(e.Horizon))
	if e.Throttled < e.Horizon {
		msg = fmt.Sprintf("workers: throttled for %v, and its next turn in %v would pass the %v horizon",
			round(e.Throttled), round(e.Wait), round(e.Horizon))
	}
	return msg + "; archived"
}

// Is makes errors.Is(err, ErrHorizon) true.
func (e *HorizonError) Is(target error) bool { return target == ErrHorizon }

// Unwrap returns asynq.SkipRetry, so that asynq archives the job at once.
func (e *HorizonError) Unwrap() error { return asynq.SkipRetry }

// round keeps a duration readable in an error message: whole seconds, or
// milliseconds below a second.
func round(d time.Duration) time.Duration {
	if d >= time.Second || d <= -time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// permanentError is a reason to archive a job at once: retrying it can only
// fail the same way. Its message is the reason's; it matches the reason and
// asynq.SkipRetry.
type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() + "; archived" }
func (e *permanentError) Unwrap() []error { return []error{e.err, asynq.SkipRetry} }

// permanent wraps err so that asynq archives the job without retrying.
func permanent(err error) error { return &permanentError{err: err} }
