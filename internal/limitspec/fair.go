package limitspec

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/throttle"
)

// The fair-share options: fair=on|off, weights=KEY:N|KEY:N.
const (
	optFair    = "fair"
	optWeights = "weights"
)

// fairness is what a spec says about fair shares: fair= if given, and weights=.
type fairness struct {
	set     bool // fair= was given
	on      bool
	weights map[string]int
}

// parseOnOff reads the value of an on|off option.
func parseOnOff(name, v string) (bool, error) {
	switch v {
	case "on", "true":
		return true, nil
	case "off", "false":
		return false, nil
	}
	return false, invalidf("%s %s: want on or off", name, quote(v))
}

// parseWeights reads weights='s value: KEY:N entries separated by '|', KEY
// being a bucket key as the key template derives it (it may hold ':'; the
// weight follows the last one).
func parseWeights(v string) (map[string]int, error) {
	if v == "" {
		return nil, invalidf("weights is empty (leave it out for equal weights)")
	}
	ws := make(map[string]int)
	for entry := range strings.SplitSeq(v, "|") {
		i := strings.LastIndexByte(entry, ':')
		if i <= 0 {
			return nil, invalidf("weights entry %s is not KEY:WEIGHT, e.g. tenant:acme:3", quote(entry))
		}
		key, num := strings.TrimSpace(entry[:i]), strings.TrimSpace(entry[i+1:])
		w, err := strconv.Atoi(num)
		if err != nil {
			return nil, invalidf("weights entry %s: weight %s is not a whole number", quote(entry), quote(num))
		}
		if _, dup := ws[key]; dup {
			return nil, invalidf("weights: key %s given twice", quote(key))
		}
		ws[key] = w
	}
	return ws, nil
}

// apply sets sp.Fair and sp.Weights from f, once sp.KeyTemplate and sp.Global are
// known: on by default when the spec has both.
func (f fairness) apply(sp *Spec) error {
	can := sp.KeyTemplate != "" && sp.Global != nil
	switch {
	case f.set && f.on && !can:
		return invalidf("fair needs key= and global= (it shares the global bucket among the keys)")
	case f.set:
		sp.Fair = f.on
	default:
		sp.Fair = can
	}
	if len(f.weights) > 0 && !sp.Fair {
		return invalidf("weights need fair=on (and key= and global=)")
	}
	sp.Weights = f.weights
	return nil
}

// validateFair checks the fair-share fields of s.
func validateFair(s Spec) error {
	if s.Fair && (s.KeyTemplate == "" || s.Global == nil) {
		return invalidf("fair needs key= and global= (it shares the global bucket among the keys)")
	}
	if len(s.Weights) > 0 && !s.Fair {
		return invalidf("weights need fair=on (and key= and global=)")
	}
	for k, w := range s.Weights {
		switch {
		case k == "" || strings.ContainsAny(k, "|,"):
			return invalidf("weights: key %s must be non-empty, without '|' or ','", quote(k))
		case w < 1 || w > throttle.MaxShareWeight:
			return invalidf("weights: %s's weight %d is not between 1 and %d", quote(k), w, throttle.MaxShareWeight)
		}
	}
	return nil
}

// writeFair writes the fair options of s that differ from the default.
func writeFair(b *strings.Builder, s Spec) {
	if s.KeyTemplate != "" && s.Global != nil && !s.Fair {
		fmt.Fprintf(b, ",%s=off", optFair)
	}
	if len(s.Weights) == 0 {
		return
	}
	keys := make([]string, 0, len(s.Weights))
	for k := range s.Weights {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(b, ",%s=", optWeights)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('|')
		}
		fmt.Fprintf(b, "%s:%d", k, s.Weights[k])
	}
}
