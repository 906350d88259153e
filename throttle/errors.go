package throttle

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrLimited matches a *LimitedError: the tokens cannot be had within the caller's budget.
	ErrLimited = errors.New("throttle: limited")
	// ErrUnavailable matches an error from a store that could not be reached,
	// timed out, answered something that is not a valid reply, or refused
	// this client (ErrRefused). Such an error names the store operation and
	// unwraps to its cause (a network error, a context's error, Redis's
	// reply).
	ErrUnavailable = errors.New("throttle: store unavailable")
	// ErrRefused matches an error from a store that answered but refused
	// this client: a wrong password, an ACL that denies a key or command. It
	// also matches ErrUnavailable. A refusal is a misconfiguration, not an
	// outage: no failure policy grants through it, so FailOpen and FailLocal
	// fail closed on it.
	ErrRefused = errors.New("throttle: store refused this client")
	// ErrInvalid matches an error for a request that can never succeed as
	// asked: an invalid policy, n out of range, or a bad key. It is returned
	// before any I/O.
	ErrInvalid = errors.New("throttle: invalid request")
	// ErrTooLarge matches an ErrInvalid error for n larger than the policy's
	// Burst, Max or Capacity: it could never be granted.
	ErrTooLarge = errors.New("throttle: n larger than burst")
	// ErrCrossSlot is returned when buckets acquired together do not share a Redis
	// Cluster hash tag. It also matches ErrInvalid.
	ErrCrossSlot = errors.New("throttle: buckets acquired together must share a hash tag")
)

// LimitedError reports that tokens were not granted because the wait would exceed
// the caller's budget (its context deadline or maxWait). Nothing was taken.
type LimitedError struct {
	RetryAfter time.Duration // how long until the same request could be granted at once
	// OverShare: the call's tenant is over its Share of the shared bucket;
	// RetryAfter is its place in its tenant's line (see Share).
	OverShare bool
}

func (e *LimitedError) Error() string {
	if e.OverShare {
		return fmt.Sprintf("throttle: limited: over its share, come back after %v", e.RetryAfter)
	}
	return fmt.Sprintf("throttle: limited: retry after %v", e.RetryAfter)
}

// Is makes errors.Is(err, ErrLimited) true, and ErrOverShare when OverShare.
func (e *LimitedError) Is(target error) bool {
	return target == ErrLimited || (e.OverShare && target == ErrOverShare)
}

// storeError is a store's failure: it matches ErrUnavailable, and
// ErrRefused if the store answered but refused this client (authentication
// or ACL). It unwraps to the cause.
type storeError struct {
	op  string // "reserve", "refund", "cooldown", "hold", "renew", "release"
	err error

	refused bool
}

func (e *storeError) Error() string {
	return "throttle: store unavailable: " + e.op + ": " + e.err.Error()
}

// Is makes errors.Is(err, ErrUnavailable) true, and ErrRefused when refused.
func (e *storeError) Is(target error) bool {
	return target == ErrUnavailable || (e.refused && target == ErrRefused)
}

// Unwrap returns the cause.
func (e *storeError) Unwrap() error { return e.err }

// invalidError is a request that can never succeed as asked (ErrInvalid):
// an invalid policy, n out of range, or a bad key. It is returned before
// any I/O.
type invalidError struct {
	reason    string
	tooLarge  bool
	crossSlot bool
}

func (e *invalidError) Error() string { return "throttle: " + e.reason }

// Is makes errors.Is match ErrInvalid, and ErrTooLarge or ErrCrossSlot where they apply.
func (e *invalidError) Is(target error) bool {
	switch target {
	case ErrInvalid:
		return true
	case ErrTooLarge:
		return e.tooLarge
	case ErrCrossSlot:
		return e.crossSlot
	}
	return false
}

func invalidf(format string, args ...any) error {
	return &invalidError{reason: fmt.Sprintf(format, args...)}
}
