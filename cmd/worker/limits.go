package main

import (
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/limitspec"
)

// limit is one limit the worker enforces: its spec, whose Policy is what
// the pool enforces, and where it was written (for messages).
type limit struct {
	spec   limitspec.Spec
	source string
}

// loadLimits reads the limits file, if any, parses the --limit specs and
// merges them (a flag replaces the file's entry for its type). Every error
// matches cli.ErrUsage and names the spec or file entry that is wrong.
func loadLimits(specs []string, file string) ([]limit, error) {
	var fromFile []limitspec.Spec
	if file != "" {
		var err error
		if fromFile, err = limitspec.LoadFile(file); err != nil {
			return nil, cli.Usagef("%w", err)
		}
	}
	fromFlags := make([]limitspec.Spec, 0, len(specs))
	flagSource := make(map[string]string, len(specs))
	for _, s := range specs {
		sp, err := limitspec.Parse(s)
		if err != nil {
			return nil, cli.Usagef("%w", err)
		}
		fromFlags = append(fromFlags, sp)
		flagSource[sp.Name] = "limit " + strconv.Quote(s)
	}
	merged, err := limitspec.Merge(fromFile, fromFlags)
	if err != nil {
		return nil, cli.Usagef("%w", err)
	}
	out := make([]limit, 0, len(merged))
	for _, sp := range merged {
		src, ok := flagSource[sp.Name]
		if !ok {
			src = fmt.Sprintf("limits file %q, type %q", file, sp.Name)
		}
		out = append(out, limit{spec: sp, source: src})
	}
	return out, nil
}
