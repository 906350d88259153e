package cli

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
)

// ErrVersion is what a command's flag parsing returns for --version, as the
// flag package returns flag.ErrHelp for --help: print Version and exit 0.
var ErrVersion = errors.New("version requested")

// Version is the line a command prints for --version: its name, the module
// version it was built from ("(devel)" for a build from a checkout), the VCS
// revision and time when the build recorded them (a "+dirty" revision had
// uncommitted changes), and the Go version.
func Version(prog string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return fmt.Sprintf("%s (no build information) %s", prog, runtime.Version())
	}
	return versionOf(prog, info)
}

func versionOf(prog string, info *debug.BuildInfo) string {
	version := info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	line := fmt.Sprintf("%s %s", prog, version)
	if rev != "" {
		line += fmt.Sprintf(" revision %s%s", rev, dirty)
	}
	if at != "" {
		line += " " + at
	}
	return fmt.Sprintf("%s %s", line, info.GoVersion)
}
