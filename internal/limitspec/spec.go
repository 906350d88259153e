package limitspec

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sluicehq/sluice/throttle"
)

// Bounds that [Spec.Validate] enforces.
const (
	MaxTypeLen = 256 // bytes in Spec.Type
	MaxKeyLen  = 256 // bytes in Spec.Key, the template before expansion
	// MaxMaxWait bounds Spec.MaxWait: a job holds a worker slot that long
	// at most, and a day is already the default horizon of a throttled job.
	MaxMaxWait = 24 * time.Hour
	// maxCount bounds burst and cost; throttle refuses larger buckets anyway.
	maxCount = 1 << 30
)

// Spec is the limit a worker enforces on one task type: a policy (a token
// bucket unless policy= says otherwise), the bucket's key, how long a job may wait for tokens, what a job costs, an
// optional global bucket taken together with the keyed one, and an optional
// bound on the jobs of one key running at once across the fleet.
//
// [Parse] and [LoadFile] return Specs that pass [Spec.Validate].
type Spec struct {
	Type string // task type the limit applies to
	// Limit is the policy: a throttle.Limit (a burst left out of the spec
	// defaults to max(1, ceil(tokens per second))), FixedWindow, SlidingLog,
	// SlidingWindow or LeakyBucket (a capacity left out defaults the same way).
	Limit throttle.Policy
	// Key is a template for the bucket key, such as "tenant:{payload.tenant}",
	// expanded by the worker for each job. "" means no key: one bucket named
	// after the type.
	Key     string
	MaxWait time.Duration   // longest a job holds a worker slot waiting; 0 means the worker's default
	Cost    int             // tokens a job takes; 0 means 1
	Global  *throttle.Limit // a bucket shared by every key of the type, taken with the keyed one; nil means none
	// InFlight is the most jobs of one key that run at once across the
	// fleet (workers.Policy.InFlight); 0 means no bound.
	InFlight int
	// Adapt: the fleet learns the effective rate under Limit, its ceiling
	// (workers.Policy.Adapt). On by default for a token bucket, the only
	// policy that adapts; adapt=off turns it off.
	Adapt bool
	// Floor is the least effective rate of an adaptive limit, per Limit's
	// period; 0 means the default, a tenth of the rate.
	Floor float64
	// Fair shares Global among the keys by weight (workers.Policy.Fair). On
	// by default when the spec has both Key and Global; fair=off turns it off.
	Fair bool
	// Weights are the keys' weights under Fair, by the key the template
	// derives ("tenant:acme"); a key not listed weighs 1.
	Weights map[string]int
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
	sp := Spec{Type: strings.TrimSpace(typ)}
	if sp.Type == "" {
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
				sp.Key = value
			case optMaxWait:
				sp.MaxWait, err = parseMaxWait(value)
			case optCost:
				sp.Cost, err = parseCount(optCost, value)
			case optGlobal:
				var g throttle.Limit
				g, err = parseGlobal(value)
				sp.Global = &g
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
	if err := sp.Validate(); err != nil {
		return Spec{}, err
	}
	return sp, nil
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

// Validate reports why s cannot be enforced, or nil: Type is not empty, at
// most [MaxTypeLen] bytes, free of control characters, '=' and ',', and
// without spaces at either end; the limits pass [throttle.Limit.Validate]; Key
// is at most [MaxKeyLen] bytes, free of control characters and ',', without
// spaces at either end, and its braces pair up with something
// between them ("tenant:{payload.tenant}"); MaxWait, Cost and InFlight are
// not negative, MaxWait is at most [MaxMaxWait], and InFlight passes
// [throttle.Concurrency.Validate] if set; and Cost fits in the bursts, or no job could ever be granted. The error
// matches [ErrInvalid].
func (s Spec) Validate() error {
	switch {
	case s.Type == "":
		return invalidf("type is empty")
	case len(s.Type) > MaxTypeLen:
		return invalidf("type is %d bytes, longer than %d", len(s.Type), MaxTypeLen)
	case strings.TrimSpace(s.Type) != s.Type:
		return invalidf("type %s starts or ends with a space", quote(s.Type))
	case strings.ContainsAny(s.Type, "=,"):
		return invalidf("type %s must not contain '=' or ','", quote(s.Type))
	case strings.IndexFunc(s.Type, unicode.IsControl) >= 0:
		return invalidf("type %s contains a control character", quote(s.Type))
	}
	if err := validatePolicy("", s.Limit); err != nil {
		return err
	}
	if s.Global != nil {
		if err := validatePolicy("global ", *s.Global); err != nil {
			return err
		}
	}
	if err := validateKey(s.Key); err != nil {
		return err
	}
	if err := validateFair(s); err != nil {
		return err
	}
	if s.MaxWait < 0 {
		return invalidf("max-wait %v must not be negative", s.MaxWait)
	}
	if s.MaxWait > MaxMaxWait {
		return invalidf("max-wait %v is longer than %v (a job would hold a worker slot that long)", s.MaxWait, MaxMaxWait)
	}
	switch {
	case s.Cost < 0:
		return invalidf("cost %d must not be negative", s.Cost)
	case s.Cost > mostOf(s.Limit):
		n, what := most(s.Limit)
		return invalidf("cost %d is larger than %s %d: no job could ever run", s.Cost, what, n)
	case s.Global != nil && s.Cost > s.Global.Burst:
		return invalidf("cost %d is larger than global burst %d: no job could ever run", s.Cost, s.Global.Burst)
	case s.InFlight < 0:
		return invalidf("in-flight %d must not be negative", s.InFlight)
	case s.InFlight > 0:
		var ie *throttle.InvalidError
		if err := (throttle.Concurrency{Max: s.InFlight}).Validate(); errors.As(err, &ie) {
			return invalidf("in-flight: %s", ie.Reason)
		} else if err != nil {
			return invalidf("in-flight: %v", err)
		}
	}
	return nil
}

// mostOf is what p grants at once.
func mostOf(p throttle.Policy) int {
	n, _ := most(p)
	return n
}

func validateKey(key string) error {
	switch {
	case len(key) > MaxKeyLen:
		return invalidf("key is %d bytes, longer than %d", len(key), MaxKeyLen)
	case strings.TrimSpace(key) != key:
		return invalidf("key %s starts or ends with a space", quote(key))
	case strings.ContainsRune(key, ','):
		return invalidf("key %s must not contain ','", quote(key))
	case strings.IndexFunc(key, unicode.IsControl) >= 0:
		return invalidf("key %s contains a control character", quote(key))
	}
	open := -1 // index of the '{' not yet closed
	for i := 0; i < len(key); i++ {
		switch key[i] {
		case '{':
			if open >= 0 {
				return invalidf("key %s: '{' at byte %d inside another {...}", quote(key), i)
			}
			open = i
		case '}':
			switch {
			case open < 0:
				return invalidf("key %s: '}' at byte %d has no '{'", quote(key), i)
			case open == i-1:
				return invalidf("key %s: empty {} at byte %d", quote(key), open)
			}
			open = -1
		}
	}
	if open >= 0 {
		return invalidf("key %s: '{' at byte %d is never closed", quote(key), open)
	}
	return nil
}

// String returns s in the grammar Parse reads, with every option spelled out
// (the burst too), so that Parse(s.String()) gives s back for any Spec that
// Parse or LoadFile returned.
func (s Spec) String() string {
	var b strings.Builder
	b.WriteString(s.Type)
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
	if s.Key != "" {
		fmt.Fprintf(&b, ",%s=%s", optKey, s.Key)
	}
	if s.MaxWait != 0 {
		fmt.Fprintf(&b, ",%s=%v", optMaxWait, s.MaxWait)
	}
	if s.Cost != 0 {
		fmt.Fprintf(&b, ",%s=%d", optCost, s.Cost)
	}
	if s.Global != nil {
		fmt.Fprintf(&b, ",%s=", optGlobal)
		writeRate(&b, s.Global.Rate, s.Global.Period)
		fmt.Fprintf(&b, ":%d", s.Global.Burst)
	}
	if s.InFlight != 0 {
		fmt.Fprintf(&b, ",%s=%d", optFlight, s.InFlight)
	}
	if adaptsByDefault(s.Limit) && !s.Adapt {
		fmt.Fprintf(&b, ",%s=off", optAdapt)
	}
	if s.Floor > 0 {
		fmt.Fprintf(&b, ",%s=", optFloor)
		writeRate(&b, s.Floor, period)
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
