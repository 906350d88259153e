package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/limitspec"
	"github.com/sluicehq/sluice/workers"
)

// limit is one limit the worker enforces: its spec, where it was written
// (for messages), and the pool policy made from it.
type limit struct {
	spec   limitspec.Spec
	source string
	policy workers.Policy
}

// loadLimits reads the limits file, if any, parses the --limit specs, merges
// them (a flag replaces the file's entry for its type) and makes a policy of
// each. Every error matches cli.ErrUsage and names the spec or file entry
// that is wrong.
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
		flagSource[sp.Type] = "limit " + strconv.Quote(s)
	}
	merged, err := limitspec.Merge(fromFile, fromFlags)
	if err != nil {
		return nil, cli.Usagef("%w", err)
	}
	out := make([]limit, 0, len(merged))
	for _, sp := range merged {
		src, ok := flagSource[sp.Type]
		if !ok {
			src = fmt.Sprintf("limits file %q, type %q", file, sp.Type)
		}
		pol, err := policyFor(sp)
		if err != nil {
			return nil, cli.Usagef("%s: %w", src, err)
		}
		out = append(out, limit{spec: sp, source: src, policy: pol})
	}
	return out, nil
}

// policyFor makes the pool policy that enforces sp. The policy is named
// after the task type, which also names its bucket when sp has no key
// template; with one, each job's bucket is the key the template gives.
func policyFor(sp limitspec.Spec) (workers.Policy, error) {
	if err := checkPolicyName(sp.Type); err != nil {
		return workers.Policy{}, err
	}
	pol := workers.Policy{
		Name:       sp.Type,
		Limit:      sp.Limit,
		Cost:       sp.Cost,
		MaxWait:    sp.MaxWait,
		InFlight:   sp.InFlight,
		Adapt:      sp.Adapt,
		AdaptFloor: sp.Floor,
		Fair:       sp.Fair,
		Weights:    sp.Weights,
	}
	if sp.Global != nil {
		pol.Global = *sp.Global
	}
	if sp.Key != "" {
		key, err := workers.KeyTemplate(sp.Key)
		if err != nil {
			return workers.Policy{}, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "workers: "))
		}
		pol.Key = key
	}
	return pol, nil
}

// checkPolicyName refuses a task type that cannot name a policy (see
// workers.Policy.Name), so that the mistake shows at start, against its spec.
func checkPolicyName(typ string) error {
	switch {
	case len(typ) > workers.MaxPolicyName:
		return fmt.Errorf("type is %d bytes, more than the %d a limited type may have (it names the policy in metrics and logs)",
			len(typ), workers.MaxPolicyName)
	case strings.ContainsAny(typ, "{}"):
		return fmt.Errorf("type %q must not contain '{' or '}' (it names the policy's buckets)", typ)
	case strings.IndexFunc(typ, unicode.IsControl) >= 0:
		return fmt.Errorf("type %q contains a control character", typ)
	}
	return nil
}
