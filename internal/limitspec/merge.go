package limitspec

import (
	"fmt"
	"maps"
	"slices"
)

// Merge combines the limits from a file with those from --limit flags (one
// Spec per type, as ParseAll returns them). The flags for a type the file
// also has replace the file's entry whole, named limits and all, in the
// file's place; flags for other types follow, in flag order. Two Specs for one type,
// two file entries for one type, or any Spec that fails [Spec.Validate], is an
// error matching [ErrInvalid]. The inputs are not modified.
func Merge(file, flags []Spec) ([]Spec, error) {
	fromFlag := make(map[string]int, len(flags))
	for i, sp := range flags {
		if err := sp.Validate(); err != nil {
			return nil, fmt.Errorf("--limit %s: %w", quote(sp.Name), err)
		}
		if j, dup := fromFlag[sp.Name]; dup {
			return nil, invalidf("--limit given twice for type %s (flags %d and %d)", quote(sp.Name), j+1, i+1)
		}
		fromFlag[sp.Name] = i
	}
	out := make([]Spec, 0, len(file)+len(flags))
	inFile := make(map[string]bool, len(file))
	for _, sp := range file {
		if err := sp.Validate(); err != nil {
			return nil, fmt.Errorf("limits file entry for %s: %w", quote(sp.Name), err)
		}
		if inFile[sp.Name] {
			return nil, invalidf("limits file has two entries for type %s", quote(sp.Name))
		}
		inFile[sp.Name] = true
		if i, ok := fromFlag[sp.Name]; ok {
			sp = flags[i]
		}
		out = append(out, sp.clone())
	}
	for _, sp := range flags {
		if !inFile[sp.Name] {
			out = append(out, sp.clone())
		}
	}
	return out, nil
}

// clone returns a copy of s that shares no memory with it (its Global is
// a value, its Key and cost funcs functions that keep no state).
func (s Spec) clone() Spec {
	s.Limits = slices.Clone(s.Limits)
	if s.CostTemplates != nil {
		s.CostTemplates = maps.Clone(s.CostTemplates)
	}
	if s.SettleTemplates != nil {
		s.SettleTemplates = maps.Clone(s.SettleTemplates)
	}
	if s.Weights != nil {
		ws := make(map[string]int, len(s.Weights))
		for k, w := range s.Weights {
			ws[k] = w
		}
		s.Weights = ws
	}
	return s
}
