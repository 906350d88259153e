package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/limitspec"
)

// limit is one limit the worker enforces: its spec, whose Policy is what
// the pool enforces, and where it was written (for messages).
type limit struct {
	spec   limitspec.Spec
	source string
}

// loadLimits reads the limits file, if any, parses the --limit specs (several
// for one type are its named limits) and merges them (the flags for a type
// replace the file's entry for it). Every error
// matches cli.ErrUsage and names the spec or file entry that is wrong.
func loadLimits(specs []string, file string) ([]limit, error) {
	var fromFile []limitspec.Spec
	if file != "" {
		var err error
		if fromFile, err = limitspec.LoadFile(file); err != nil {
			return nil, cli.Usagef("%w", err)
		}
	}
	// Several flags for one type are its named limits, read together.
	fromFlags, err := limitspec.ParseAll(specs)
	if err != nil {
		return nil, cli.Usagef("%w", err)
	}
	// Each type's flags, as written, in order: the spec's type is what comes
	// before its first '=' (ParseAll read it so).
	flagSource := make(map[string]string, len(fromFlags))
	for _, s := range specs {
		typ, _, _ := strings.Cut(s, "=")
		typ = strings.TrimSpace(typ)
		if src, ok := flagSource[typ]; ok {
			flagSource[typ] = src + ", " + strconv.Quote(s)
		} else {
			flagSource[typ] = "limit " + strconv.Quote(s)
		}
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
