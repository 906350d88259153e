package limitspec

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrInvalid is matched by every error that reports a malformed or impossible
// limit, from [Parse], [LoadFile], [Merge] and [Spec.Validate]. An error
// reading the limits file (a missing file, say) does not match it.
var ErrInvalid = errors.New("limitspec: invalid limit")

// invalidError is a reason a limit is invalid; its message is the reason alone,
// so that callers can put the spec, file or entry in front of it.
type invalidError struct{ reason string }

func (e *invalidError) Error() string { return e.reason }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

func invalidf(format string, args ...any) error {
	return &invalidError{reason: fmt.Sprintf(format, args...)}
}

// maxQuoted bounds how much of a bad input goes into an error message.
const maxQuoted = 80

// quote returns s in Go quotes, cut to maxQuoted bytes.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:maxQuoted]) + "..."
}
