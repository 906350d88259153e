package limitspec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// MaxMaxWait bounds a spec's max-wait: a job holds a worker slot that long
// at most, and a day is already the default horizon of a throttled job.
const MaxMaxWait = 24 * time.Hour

// maxCount bounds burst and cost; throttle refuses larger buckets anyway.
const maxCount = 1 << 30

// Spec is the limit a worker enforces on one task type: the workers.Policy
// the pool takes it as, and the key template its Key was made from, which
// the spec writes back (a KeyFunc cannot be printed).
//
// The policy's Name is the task type. Its Limit is the policy= (a
// throttle.Limit unless the spec says otherwise; a burst left out defaults
// to max(1, ceil(tokens per second)), and so does a leaky bucket's
// capacity). Its Global, when the spec has global=, is a throttle.Limit.
// Adapt is on by default for a token bucket (adapt=off turns it off), with
// AdaptFloor per Limit's period; Fair is on by default when the spec has
// both a key and global= (fair=off turns it off), with Weights by the key
// the template derives ("tenant:acme").
//
// [Parse] and [LoadFile] return Specs that pass [Spec.Validate], whose Key
// is made from KeyTemplate by workers.KeyTemplate.
type Spec struct {
	workers.Policy
	// KeyTemplate is the template of the policy's Key, such as
	// "tenant:{payload.tenant}", expanded by the pool for each job. "" means
	// no key: one bucket named after the type.
	KeyTemplate string
}

// Parse parses one limit written as
//
//	TYPE=RATE/UNIT[,policy=NAME][,burst=N][,slots=N][,capacity=N][,key=TEMPLATE][,max-wait=DURATION][,cost=N][,global=RATE/UNIT[:BURST]][,in-flight=N]
//
// for example "email:send=100/m,burst=10,key=tenant:{payload.tenant}". Spaces
// around each part are ignored.
//
// NAME is the policy (default token-bucket):
//
//   - token-bucket: RATE per UNIT on average, bursts up to burst=N;
//   - fixed-window: at most RATE per aligned UNIT (calendar minute, ...);
//     up to twice that across a window's edge;
//   - sliding-log: at most RATE in any span of one UNIT, exactly;
//   - sliding-window: about RATE in any span of one UNIT (exactly RATE in any
//     slots=N whole slots, default 10), in constant memory;
//   - leaky-bucket: an even pace, one every UNIT/RATE, at most capacity=N
//     queued (default max(1, ceil(per second))); beyond that, refused.
//
// For the window policies RATE must be a whole number: the most per UNIT.
// burst, slots and capacity apply to one policy each; given for another, they
// are an error naming both. global= is always a token bucket. MAX-WAIT is a Go duration ("2s", "500ms") and
// must be positive and at most [MaxMaxWait] (24h); leave it out for the
// worker's default. Because commas
// separate the options, neither the type nor the key may contain one.
//
// The result passes [Spec.Validate]. An error names the spec and the part
// that is wrong, for example
//
//	limit "x=50/q": unknown unit "q" (want s, m or h)
//
// and matches [ErrInvalid].
func Parse(s string) (Spec, error) {
	sp, err := parse(s)
	if err != nil {
		return Spec{}, fmt.Errorf("limit %s: %w", quote(s), err)
	}
	return sp, nil
}

// The options Parse knows, in the order String writes them.
const (
	optBurst    = "burst"
	optKey      = "key"
	optMaxWait  = "max-wait"
	optCost     = "cost"
	optGlobal   = "global"
	optFlight   = "in-flight"
	optPolicy   = "policy"
	optSlots    = "slots"
	optCapacity = "capacity"
)

func parse(s string) (Spec, error) {
	head, opts, hasOpts := strings.Cut(s, ",")
	typ, rate, ok := strings.Cut(head, "=")
	if !ok {
		return Spec{}, invalidf("want TYPE=RATE/UNIT, e.g. http:request=50/s")
	}
	sp := Spec{Policy: workers.Policy{Name: strings.TrimSpace(typ)}}
	if sp.Name == "" {
		return Spec{}, invalidf("type is empty")
	}
	r, period, err := parseRate(strings.TrimSpace(rate))
	if err != nil {
		return Spec{}, err
	}
	var sh shape
	var ad adaptive
	var fa fairness
	if hasOpts {
		seen := make(map[string]bool, 5)
		for part := range strings.SplitSeq(opts, ",") {
			name, value, ok := strings.Cut(part, "=")
			name, value = strings.TrimSpace(name), strings.TrimSpace(value)
			switch {
			case strings.TrimSpace(part) == "":
				return Spec{}, invalidf("empty option (a stray comma?)")
			case !ok:
				return Spec{}, invalidf("option %s is not NAME=VALUE", quote(name))
			case seen[name]:
				return Spec{}, invalidf("%s given twice", name)
			}
			seen[name] = true
			switch name {
			case optBurst:
				sh.burst, err = parseCount(optBurst, value)
			case optPolicy:
				sh.policy = value
			case optSlots:
				sh.slots, err = parseCount(optSlots, value)
			case optCapacity:
				sh.capacity, err = parseCount(optCapacity, value)
			case optKey:
				if value == "" {
					err = invalidf("key is empty (leave it out for no key)")
				}
				sp.KeyTemplate = value
			case optMaxWait:
				sp.MaxWait, err = parseMaxWait(value)
			case optCost:
				sp.Cost, err = parseCount(optCost, value)
			case optGlobal:
				var g throttle.Limit
				g, err = parseGlobal(value)
				sp.Global = g
			case optFlight:
				sp.InFlight, err = parseCount(optFlight, value)
			case optAdapt:
				ad.set = true
				ad.on, err = parseAdapt(value)
			case optFloor:
				ad.floor, ad.floorP, err = parseRate(value)
			case optFair:
				fa.set = true
				fa.on, err = parseOnOff(optFair, value)
			case optWeights:
				fa.weights, err = parseWeights(value)
			default:
				err = invalidf("unknown option %s (want policy, burst, slots, capacity, key, max-wait, cost, global, in-flight, adapt, floor, fair or weights)", quote(name))
			}
			if err != nil {
				return Spec{}, err
			}
		}
	}
	if sp.Limit, err = sh.build(r, period); err != nil {
		return Spec{}, err
	}
	if err := ad.apply(&sp); err != nil {
		return Spec{}, err
	}
	if err := fa.apply(&sp); err != nil {
		return Spec{}, err
	}
	return sp.finish()
}

// units maps every unit name Parse accepts to its period.
var units = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
}

// parseRate parses RATE/UNIT.
func parseRate(s string) (rate float64, period time.Duration, err error) {
	num, unit, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, invalidf("rate %s has no unit: want RATE/UNIT, e.g. 50/s", quote(s))
	}
	num, unit = strings.TrimSpace(num), strings.TrimSpace(unit)
	if !isDecimal(num) {
		return 0, 0, invalidf("rate %s is not a positive decimal number", quote(num))
	}
	rate, err = strconv.ParseFloat(num, 64)
	if err != nil || rate <= 0 || math.IsInf(rate, 0) {
		return 0, 0, invalidf("rate %s is not a positive decimal number", quote(num))
	}
	period, ok = units[strings.ToLower(unit)]
	if !ok {
		return 0, 0, invalidf("unknown unit %s (want s, m or h)", quote(unit))
	}
	return rate, period, nil
}

// parseGlobal parses RATE/UNIT[:BURST].
func parseGlobal(s string) (throttle.Limit, error) {
	rate, burstText, hasBurst := strings.Cut(s, ":")
	r, period, err := parseRate(strings.TrimSpace(rate))
	if err != nil {
		return throttle.Limit{}, fmt.Errorf("global: %w", err)
	}
	burst := DefaultBurst(r, period)
	if hasBurst {
		if burst, err = parseCount("global burst", strings.TrimSpace(burstText)); err != nil {
			return throttle.Limit{}, err
		}
	}
	return throttle.Limit{Rate: r, Period: period, Burst: burst}, nil
}

// parseCount parses a burst or cost: a whole number from 1 to maxCount.
func parseCount(what, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if !isDigits(s) || err != nil || n < 1 || n > maxCount {
		return 0, invalidf("%s %s is not a whole number from 1 to %d", what, quote(s), maxCount)
	}
	return n, nil
}

func parseMaxWait(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, invalidf("max-wait %s is not a duration such as 2s or 500ms", quote(s))
	}
	if d <= 0 {
		return 0, invalidf("max-wait %v must be positive (leave it out for the worker's default)", d)
	}
	return d, nil // Validate checks MaxMaxWait
}

// DefaultBurst is the burst of a limit written without one: the tokens the
// bucket earns in one second, rounded up, and at least 1. A rate within one
// part in a billion of a whole number per second counts as that number, so
// 60/m gets 1, not 2.
func DefaultBurst(rate float64, period time.Duration) int {
	if period <= 0 {
		period = time.Second
	}
	perSec := rate * float64(time.Second) / float64(period)
	if r := math.Round(perSec); math.Abs(perSec-r) <= 1e-9*perSec {
		perSec = r
	}
	switch b := math.Ceil(perSec); {
	case !(b >= 1): // also NaN
		return 1
	case b > maxCount:
		return maxCount // such a rate fails throttle's validation anyway
	default:
		return int(b)
	}
}

// Validate reports why s cannot be enforced, or nil: Name, the task type,
// passes workers.CheckName and holds no '=' or ',' and no spaces at either
// end; the limits pass their Validate; KeyTemplate, if set, holds no ',' and
// no spaces at either end and passes workers.KeyTemplate; MaxWait, Cost and
// InFlight are not negative, MaxWait is at most [MaxMaxWait], and InFlight
// passes [throttle.Concurrency.Validate] if set; and Cost fits in the
// bursts, or no job could ever be granted. The error matches [ErrInvalid].
func (s Spec) Validate() error {
	_, err := s.validate()
	return err
}

// validate is Validate, returning the policy's Key made from KeyTemplate.
func (s Spec) validate() (workers.KeyFunc, error) {
	switch {
	case s.Name == "":
		return nil, invalidf("type is empty")
	case strings.TrimSpace(s.Name) != s.Name:
		return nil, invalidf("type %s starts or ends with a space", quote(s.Name))
	case strings.ContainsAny(s.Name, "=,"):
		return nil, invalidf("type %s must not contain '=' or ','", quote(s.Name))
	}
	if err := workers.CheckName(s.Name); err != nil {
		return nil, invalidf("type %v", err)
	}
	if err := validatePolicy("", s.Limit); err != nil {
		return nil, err
	}
	global, hasGlobal := globalOf(s)
	if s.Global != nil && !hasGlobal {
		return nil, invalidf("global %T is not a token bucket (global= always is)", s.Global)
	}
	if hasGlobal {
		if err := validatePolicy("global ", global); err != nil {
			return nil, err
		}
	}
	key, err := keyOf(s.KeyTemplate)
	if err != nil {
		return nil, err
	}
	if err := validateFair(s); err != nil {
		return nil, err
	}
	if s.MaxWait < 0 {
		return nil, invalidf("max-wait %v must not be negative", s.MaxWait)
	}
	if s.MaxWait > MaxMaxWait {
		return nil, invalidf("max-wait %v is longer than %v (a job would hold a worker slot that long)", s.MaxWait, MaxMaxWait)
	}
	switch {
	case s.Cost < 0:
		return nil, invalidf("cost %d must not be negative", s.Cost)
	case s.Cost > mostOf(s.Limit):
		n, what := most(s.Limit)
		return nil, invalidf("cost %d is larger than %s %d: no job could ever run", s.Cost, what, n)
	case hasGlobal && s.Cost > global.Burst:
		return nil, invalidf("cost %d is larger than global burst %d: no job could ever run", s.Cost, global.Burst)
	case s.InFlight < 0:
		return nil, invalidf("in-flight %d must not be negative", s.InFlight)
	case s.InFlight > 0:
		if err := (throttle.Concurrency{Max: s.InFlight}).Validate(); err != nil {
			return nil, invalidf("in-flight: %s", reason(err))
		}
	}
	return key, nil
}

// finish validates s and gives its policy the Key its template makes: the
// last step of Parse and LoadFile.
func (s Spec) finish() (Spec, error) {
	key, err := s.validate()
	if err != nil {
		return Spec{}, err
	}
	s.Key = key
	return s, nil
}

// globalOf is s's global bucket, if it has one: global= is always a token bucket.
func globalOf(s Spec) (throttle.Limit, bool) {
	g, ok := s.Global.(throttle.Limit)
	return g, ok
}

// mostOf is what p grants at once.
func mostOf(p throttle.Policy) int {
	n, _ := most(p)
	return n
}

// keyOf checks a key template and makes the policy's Key of it: nil for
// none. Only what the spec's grammar needs is checked here (no ',', no
// spaces at either end); workers.KeyTemplate checks the rest.
func keyOf(tmpl string) (workers.KeyFunc, error) {
	switch {
	case tmpl == "":
		return nil, nil
	case strings.TrimSpace(tmpl) != tmpl:
		return nil, invalidf("key %s starts or ends with a space", quote(tmpl))
	case strings.ContainsRune(tmpl, ','):
		return nil, invalidf("key %s must not contain ','", quote(tmpl))
	}
	key, err := workers.KeyTemplate(tmpl)
	if err != nil {
		return nil, invalidf("%s", strings.TrimPrefix(err.Error(), "workers: "))
	}
	return key, nil
}

// String returns s in the grammar Parse reads, with every option spelled out
// (the burst too), so that Parse(s.String()) gives s back for any Spec that
// Parse or LoadFile returned.
func (s Spec) String() string {
	var b strings.Builder
	b.WriteString(s.Name)
	b.WriteByte('=')
	sh, rate, period := shapeOf(s.Limit)
	writeRate(&b, rate, period)
	if sh.policy != TokenBucket {
		fmt.Fprintf(&b, ",%s=%s", optPolicy, sh.policy)
	}
	for _, o := range []struct {
		name string
		n    int
	}{{optBurst, sh.burst}, {optSlots, sh.slots}, {optCapacity, sh.capacity}} {
		if o.n != 0 {
			fmt.Fprintf(&b, ",%s=%d", o.name, o.n)
		}
	}
	if s.KeyTemplate != "" {
		fmt.Fprintf(&b, ",%s=%s", optKey, s.KeyTemplate)
	}
	if s.MaxWait != 0 {
		fmt.Fprintf(&b, ",%s=%v", optMaxWait, s.MaxWait)
	}
	if s.Cost != 0 {
		fmt.Fprintf(&b, ",%s=%d", optCost, s.Cost)
	}
	if g, ok := globalOf(s); ok {
		fmt.Fprintf(&b, ",%s=", optGlobal)
		writeRate(&b, g.Rate, g.Period)
		fmt.Fprintf(&b, ":%d", g.Burst)
	}
	if s.InFlight != 0 {
		fmt.Fprintf(&b, ",%s=%d", optFlight, s.InFlight)
	}
	if adaptsByDefault(s.Limit) && !s.Adapt {
		fmt.Fprintf(&b, ",%s=off", optAdapt)
	}
	if s.AdaptFloor > 0 {
		fmt.Fprintf(&b, ",%s=", optFloor)
		writeRate(&b, s.AdaptFloor, period)
	}
	writeFair(&b, s)
	return b.String()
}

// writeRate writes RATE/UNIT; a Period that is not a second, minute or hour
// (which Parse never returns) is written as a Go duration.
func writeRate(b *strings.Builder, rate float64, period time.Duration) {
	b.WriteString(strconv.FormatFloat(rate, 'f', -1, 64))
	b.WriteByte('/')
	switch period {
	case 0, time.Second:
		b.WriteString("s")
	case time.Minute:
		b.WriteString("m")
	case time.Hour:
		b.WriteString("h")
	default:
		b.WriteString(period.String())
	}
}

// isDecimal reports whether s is digits with an optional fraction: "50", "0.5".
func isDecimal(s string) bool {
	whole, frac, hasFrac := strings.Cut(s, ".")
	return isDigits(whole) && (!hasFrac || isDigits(frac))
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
