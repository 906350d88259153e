package throttle

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrLimited matches a *LimitedError: the tokens cannot be had within the caller's budget.
	ErrLimited = errors.New("throttle: limited")
	// ErrUnavailable matches a *StoreError: the store could not be reached in time or answered badly.
	ErrUnavailable = errors.New("throttle: store unavailable")
	// ErrInvalid matches an *InvalidError: the request can never succeed as asked.
	ErrInvalid = errors.New("throttle: invalid request")
	// ErrTooLarge matches an *InvalidError for n larger than the policy's
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

// StoreError reports a store that could not be reached, timed out, answered
// something that is not a valid reply, or refused this client (a wrong
// password, an ACL that denies a key or command). It unwraps to the cause.
//
// A refusal is a misconfiguration, not an outage: no failure policy grants
// through it, so FailOpen and FailLocal fail closed on it.
type StoreError struct {
	Op  string // "reserve", "refund", "cooldown", "hold", "renew", "release"
	Err error

	refused bool
}

// Refused reports whether the store answered but refused this client:
// authentication or ACL.
func (e *StoreError) Refused() bool { return e.refused }

func (e *StoreError) Error() string {
	return "throttle: store unavailable: " + e.Op + ": " + e.Err.Error()
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *StoreError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the cause.
func (e *StoreError) Unwrap() error { return e.Err }

// InvalidError reports a request that can never succeed as asked: an invalid
// limit, n out of range, or a bad key. It is returned before any I/O.
type InvalidError struct {
	Reason    string
	tooLarge  bool
	crossSlot bool
}

func (e *InvalidError) Error() string { return "throttle: " + e.Reason }

// Is makes errors.Is match ErrInvalid, and ErrTooLarge or ErrCrossSlot where they apply.
func (e *InvalidError) Is(target error) bool {
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
	return &InvalidError{Reason: fmt.Sprintf(format, args...)}
}
