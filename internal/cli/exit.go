package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Exit codes of sluice's commands.
const (
	ExitOK          = 0
	ExitFailure     = 1   // a runtime failure
	ExitUsage       = 2   // bad usage or input
	ExitInterrupted = 130 // stopped by a signal before finishing, as shells report SIGINT
)

// ErrUsage is matched by errors that report bad usage or input: [Usagef]
// makes them, and [RedisFromURL] returns them.
var ErrUsage = errors.New("cli: bad usage")

// usageError is a message that matches ErrUsage.
type usageError struct{ err error }

func (e *usageError) Error() string        { return e.err.Error() }
func (e *usageError) Unwrap() error        { return e.err }
func (e *usageError) Is(target error) bool { return target == ErrUsage }

// Usagef formats an error, as fmt.Errorf does (%w included), that matches
// [ErrUsage], so that [ExitCode] gives [ExitUsage] for it.
func Usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// ExitCode returns the exit code for err: [ExitOK] for nil, [ExitUsage] if
// it matches [ErrUsage], else [ExitFailure].
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrUsage):
		return ExitUsage
	}
	return ExitFailure
}

// Report writes "prog: err" on a line of its own to w and returns
// [ExitCode](err). It writes nothing for a nil err. The message goes through
// [ClipMessage]: an error never echoes a huge argument.
func Report(w io.Writer, prog string, err error) int {
	if err != nil {
		fmt.Fprintf(w, "%s: %s\n", prog, ClipMessage(err.Error()))
	}
	return ExitCode(err)
}

// Parsed handles what a command's flag parsing returned: for flag.ErrHelp
// it prints usage to stdout, for ErrVersion the command's Version, and for
// another error it reports it with a pointer to --help; done says whether
// the command ends there, with code. A nil err is not done.
func Parsed(err error, prog, usage string, stdout, stderr io.Writer) (code int, done bool) {
	switch {
	case err == nil:
		return ExitOK, false
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return ExitOK, true
	case errors.Is(err, ErrVersion):
		fmt.Fprintln(stdout, Version(prog))
		return ExitOK, true
	}
	Report(stderr, prog, err)
	fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", prog)
	return ExitCode(err), true
}
