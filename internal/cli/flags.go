package cli

import (
	"errors"
	"flag"
	"io"
	"os"
)

// Flags is a command's flags: a flag.FlagSet that prints nothing (the
// command prints its own usage, see Parsed), with a --version flag, and
// each flag's environment variable (EnvName) read once the command line is
// parsed, a flag given winning over its variable. Define the command's flags
// on it as on a flag.FlagSet, then call Parse; Given says what was set.
type Flags struct {
	*flag.FlagSet
	// NoEnv leaves the environment unread, for a command whose flags have
	// no variables.
	NoEnv     bool
	version   bool
	fallbacks [][2]string // flag name, variable
}

// NewFlags returns the flags of the command prog, holding --version.
func NewFlags(prog string) *Flags {
	f := &Flags{FlagSet: flag.NewFlagSet(prog, flag.ContinueOnError)}
	f.SetOutput(io.Discard)
	f.Usage = func() {}
	f.BoolVar(&f.version, "version", false, "")
	return f
}

// Fallback makes the environment variable env the last source of the flag
// name: it is read when neither the flag nor its own variable is set, as
// REDIS_URL is for --redis.
func (f *Flags) Fallback(name, env string) {
	f.fallbacks = append(f.fallbacks, [2]string{name, env})
}

// Parse is ParseArgs(args) then Finish: the whole command line at once.
func (f *Flags) Parse(args []string) error {
	if err := f.ParseArgs(args); err != nil {
		return err
	}
	return f.Finish()
}

// ParseArgs parses args as flag.FlagSet.Parse does, up to the first
// argument that is not a flag: flag.ErrHelp for -h or --help, an error
// matching ErrUsage for a bad flag. A command that takes flags among its
// arguments calls it again with the arguments after each one, then Finish.
func (f *Flags) ParseArgs(args []string) error {
	err := f.FlagSet.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return err
	}
	return Usagef("%v", err)
}

// Finish ends parsing: ErrVersion if --version was given; else each flag
// not given on the command line is set from its environment variable
// (EnvName; for a Repeatable flag, several values separated by ';' or
// newlines), then from its Fallback. A blank variable counts as unset. A bad value is an error matching
// ErrUsage that names the variable.
func (f *Flags) Finish() error {
	if f.version {
		return ErrVersion
	}
	if f.NoEnv {
		return nil
	}
	if err := fromEnv(f.FlagSet, os.LookupEnv, "help", "version"); err != nil {
		return err
	}
	for _, fb := range f.fallbacks {
		if v, ok := os.LookupEnv(fb[1]); ok && !f.Given(fb[0]) {
			if err := f.Set(fb[0], v); err != nil {
				return Usagef("%s=%q: %v", fb[1], v, err)
			}
		}
	}
	return nil
}

// Given reports whether the flag name was set: on the command line, or
// after Finish by its environment variable or fallback.
func (f *Flags) Given(name string) bool {
	given := false
	f.Visit(func(fl *flag.Flag) { given = given || fl.Name == name })
	return given
}

// NoArgs is an error matching ErrUsage if arguments are left after the
// flags, for a command that takes none; nil otherwise.
func (f *Flags) NoArgs() error {
	if f.NArg() > 0 {
		return Usagef("unexpected argument %q (every option is a --flag)", f.Arg(0))
	}
	return nil
}
