package limitspec

import (
	"fmt"
	"math"
	"slices"
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
// AdaptFloor per its period; with a key and global=, the limit that adapts
// is the global one unless adapt=key (workers.Policy.AdaptKey). Fair is on by default when the spec has
// both a key and global= (fair=off turns it off), with Weights by the key
// the template derives ("tenant:acme"). Priorities is on by default with
// Fair (priority=off turns it off), else off unless priority=on or
// priority-floor=PCT (PriorityFloor, as a fraction) is given.
//
// [Parse] and [LoadFile] return Specs that pass [Spec.Validate], whose Key
// is made from KeyTemplate by workers.KeyTemplate.
type Spec struct {
	workers.Policy
	// KeyTemplate is the template of the policy's Key, such as
	// "tenant:{payload.tenant}", expanded by the pool for each job. "" means
	// no key: one bucket named after the type.
	KeyTemplate string
	// CostTemplates are the templates of the policy's CostFrom funcs, by
	// limit name ("" for the unnamed Limit), such as "{body.max_tokens}",
	// made by workers.CostTemplate; a limit with a template has no Cost.
	CostTemplates map[string]string
	// SettleTemplates are the templates of the named limits' SettleFrom
	// funcs, by limit name, such as "{answer.usage.total_tokens}", made by
	// workers.SettleTemplate: what a job really used, read from its answer.
	SettleTemplates map[string]string
}

// Parse parses one limit written as
//
//	TYPE=RATE/UNIT[,name=NAME][,policy=NAME][,burst=N][,slots=N][,capacity=N][,key=TEMPLATE][,max-wait=DURATION][,cost=N|{TEMPLATE}][,settle={TEMPLATE}][,global=RATE/UNIT[:BURST]][,in-flight=N|auto[:[FLOOR-]CEIL]][,priority=on|off][,priority-floor=PCT]
//
// for example "email:send=100/m,burst=10,key=tenant:{payload.tenant}". Spaces
// around each part are ignored. name= makes the limit one of the type's
// named limits (see [ParseAll], which reads several for one type). cost= is
// a whole number, or a template the pool reads each job's cost with
// (workers.CostTemplate): {payload.FIELD}, {header.NAME}, and for type
// http:request {body.FIELD}; a job whose cost cannot be read is archived.
// settle=, on a named limit of type http:request, reads what the job really
// used from its answer (workers.SettleTemplate): {answer.PATH}, a dotted
// path into the answer's JSON body, or {answer-header.NAME}; the job's turn
// is then charged that instead of its cost.
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
	optSettle   = "settle"
	optGlobal   = "global"
	optFlight   = "in-flight"
	optPolicy   = "policy"
	optSlots    = "slots"
	optCapacity = "capacity"
	optName     = "name"
)

// ParseAll parses specs as Parse does, where several may be for one type:
// each of a type's specs is then one of its limits, taken together, all or
// nothing, and names it with name=NAME, as in
//
//	http:request=3000/m,name=requests
//	http:request=90000/m,name=tokens,cost={body.max_tokens}
//
// One of a type's specs may leave name= out: that is its unnamed limit,
// which keeps the bucket a type of one limit has. The type's own options
// (key, max-wait, global, in-flight, adapt, floor, fair, weights) are
// written once, on any of its specs; adapt and floor are about its first
// limit (the unnamed one, else the first named), which is also the bucket
// an upstream's cooldown applies to and the one global= takes the cost of.
// The others (policy, burst, slots, capacity, cost) are each limit's own.
//
// It returns one Spec per type, in the order of the types' first specs.
// An error names the spec, or the type, that is wrong, and matches
// [ErrInvalid].
func ParseAll(specs []string) ([]Spec, error) {
	var order []string
	parts := make(map[string][]part)
	texts := make(map[string][]string)
	for _, s := range specs {
		pt, err := parsePart(s)
		if err != nil {
			return nil, fmt.Errorf("limit %s: %w", quote(s), err)
		}
		if _, ok := parts[pt.typ]; !ok {
			order = append(order, pt.typ)
		}
		parts[pt.typ] = append(parts[pt.typ], pt)
		texts[pt.typ] = append(texts[pt.typ], s)
	}
	out := make([]Spec, 0, len(order))
	for _, typ := range order {
		sp, err := build(parts[typ])
		switch {
		case err != nil && len(texts[typ]) == 1:
			return nil, fmt.Errorf("limit %s: %w", quote(texts[typ][0]), err)
		case err != nil:
			return nil, fmt.Errorf("limits of type %s: %w", quote(typ), err)
		}
		out = append(out, sp)
	}
	return out, nil
}

func parse(s string) (Spec, error) {
	pt, err := parsePart(s)
	if err != nil {
		return Spec{}, err
	}
	return build([]part{pt})
}

// part is what one spec says: one limit of its type, and the options of the
// type it gives.
type part struct {
	typ    string
	name   string // name=; "" for the type's unnamed limit
	rate   float64
	period time.Duration
	sh     shape
	cost   string // cost= as written: a number or a template; "" if not given
	settle string // settle= as written: a template; "" if not given
	opts   typeOpts
}

// typeOpts are the options of a type, beside its limits: given on any one
// of its specs, or at the top of its file entry.
type typeOpts struct {
	given   []string // the options given, by name
	key     string
	maxWait time.Duration
	global  throttle.Policy // a throttle.Limit, or nil
	fl      flight
	ad      adaptive
	fa      fairness
	pr      priorities
}

// typeOptions are the options of a type, as opposed to those of one limit.
var typeOptions = []string{optKey, optMaxWait, optGlobal, optFlight, optAdapt, optFloor, optFair, optWeights, optPriority, optPriorityFloor}

// join adds the options of from to o: an option given twice, even with the
// same value, is an error (it is written once, on any of the type's specs).
func (o *typeOpts) join(from typeOpts) error {
	for _, name := range from.given {
		if contains(o.given, name) {
			return invalidf("%s given on two of its limits (write it once)", name)
		}
		o.given = append(o.given, name)
		switch name {
		case optKey:
			o.key = from.key
		case optMaxWait:
			o.maxWait = from.maxWait
		case optGlobal:
			o.global = from.global
		case optFlight:
			o.fl = from.fl
		case optAdapt:
			o.ad.set, o.ad.on, o.ad.key = from.ad.set, from.ad.on, from.ad.key
		case optFloor:
			o.ad.floor, o.ad.floorP = from.ad.floor, from.ad.floorP
		case optFair:
			o.fa.set, o.fa.on = from.fa.set, from.fa.on
		case optWeights:
			o.fa.weights = from.fa.weights
		case optPriority:
			o.pr.set, o.pr.on = from.pr.set, from.pr.on
		case optPriorityFloor:
			o.pr.floor = from.pr.floor
		}
	}
	return nil
}

// parsePart parses one spec, checking each option alone.
func parsePart(s string) (part, error) {
	head, opts, hasOpts := strings.Cut(s, ",")
	typ, rate, ok := strings.Cut(head, "=")
	if !ok {
		return part{}, invalidf("want TYPE=RATE/UNIT, e.g. http:request=50/s")
	}
	pt := part{typ: strings.TrimSpace(typ)}
	if pt.typ == "" {
		return part{}, invalidf("type is empty")
	}
	var err error
	if pt.rate, pt.period, err = parseRate(strings.TrimSpace(rate)); err != nil {
		return part{}, err
	}
	if !hasOpts {
		return pt, nil
	}
	seen := make(map[string]bool, 5)
	o := &pt.opts
	for p := range strings.SplitSeq(opts, ",") {
		name, value, ok := strings.Cut(p, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		switch {
		case strings.TrimSpace(p) == "":
			return part{}, invalidf("empty option (a stray comma?)")
		case !ok:
			return part{}, invalidf("option %s is not NAME=VALUE", quote(name))
		case seen[name]:
			return part{}, invalidf("%s given twice", name)
		}
		seen[name] = true
		if contains(typeOptions, name) {
			o.given = append(o.given, name)
		}
		switch name {
		case optBurst:
			pt.sh.burst, err = parseCount(optBurst, value)
		case optPolicy:
			pt.sh.policy = value
		case optSlots:
			pt.sh.slots, err = parseCount(optSlots, value)
		case optCapacity:
			pt.sh.capacity, err = parseCount(optCapacity, value)
		case optName:
			pt.name = value
			if value == "" {
				err = invalidf("name is empty (leave it out for the type's unnamed limit)")
			}
		case optKey:
			if value == "" {
				err = invalidf("key is empty (leave it out for no key)")
			}
			o.key = value
		case optMaxWait:
			o.maxWait, err = parseMaxWait(value)
		case optCost:
			pt.cost = value
			if value == "" {
				err = invalidf("cost is empty (leave it out for 1)")
			}
		case optSettle:
			pt.settle = value
			if value == "" {
				err = invalidf("settle is empty (leave it out to keep the cost charged)")
			}
		case optGlobal:
			var g throttle.Limit
			g, err = parseGlobal(value)
			o.global = g
		case optFlight:
			o.fl, err = parseFlight(value)
		case optAdapt:
			o.ad.set = true
			o.ad.on, o.ad.key, err = parseAdapt(value)
		case optFloor:
			o.ad.floor, o.ad.floorP, err = parseRate(value)
		case optFair:
			o.fa.set = true
			o.fa.on, err = parseOnOff(optFair, value)
		case optWeights:
			o.fa.weights, err = parseWeights(value)
		case optPriority:
			o.pr.set = true
			o.pr.on, err = parseOnOff(optPriority, value)
		case optPriorityFloor:
			o.pr.floor, err = parsePriorityFloor(value)
		default:
			err = invalidf("unknown option %s (want name, policy, burst, slots, capacity, key, max-wait, cost, settle, global, in-flight, adapt, floor, fair, weights, priority or priority-floor)", quote(name))
		}
		if err != nil {
			return part{}, err
		}
	}
	return pt, nil
}

// build makes the Spec of one type from its parts, in order: the unnamed
// limit (at most one) is the policy's Limit, and the named ones its Limits.
func build(parts []part) (Spec, error) {
	var o typeOpts
	for _, pt := range parts {
		if err := o.join(pt.opts); err != nil {
			return Spec{}, err
		}
	}
	sp := Spec{Policy: workers.Policy{Name: parts[0].typ, MaxWait: o.maxWait, Global: o.global, InFlight: o.fl.max, InFlightAuto: o.fl.auto, InFlightFloor: o.fl.floor}, KeyTemplate: o.key}
	unnamed := false
	for _, pt := range parts {
		lim, err := pt.sh.build(pt.rate, pt.period)
		if err != nil {
			return Spec{}, inLimit(pt.name, err)
		}
		cost, tmpl, err := parseCost(pt.cost)
		if err != nil {
			return Spec{}, inLimit(pt.name, err)
		}
		if tmpl != "" {
			if sp.CostTemplates == nil {
				sp.CostTemplates = make(map[string]string)
			}
			sp.CostTemplates[pt.name] = tmpl
		}
		if pt.settle != "" {
			if pt.name == "" {
				return Spec{}, invalidf("settle %s is for a named limit (give the limit a name=, e.g. name=tokens)", quote(pt.settle))
			}
			if sp.SettleTemplates == nil {
				sp.SettleTemplates = make(map[string]string)
			}
			sp.SettleTemplates[pt.name] = pt.settle
		}
		switch {
		case pt.name == "" && unnamed:
			return Spec{}, invalidf("two limits without name= (give each of the type's limits a name=)")
		case pt.name == "":
			unnamed = true
			sp.Limit, sp.Cost = lim, cost
		case slices.ContainsFunc(sp.Limits, func(l workers.NamedLimit) bool { return l.Name == pt.name }):
			return Spec{}, invalidf("name %s given to two of its limits", quote(pt.name))
		default:
			sp.Limits = append(sp.Limits, workers.NamedLimit{Name: pt.name, Limit: lim, Cost: cost})
		}
	}
	if err := o.ad.apply(&sp); err != nil {
		return Spec{}, err
	}
	if err := o.fa.apply(&sp); err != nil {
		return Spec{}, err
	}
	if err := o.pr.apply(&sp); err != nil {
		return Spec{}, err
	}
	return sp.finish()
}

// inLimit puts the name of a named limit in front of err.
func inLimit(name string, err error) error {
	if name == "" {
		return err
	}
	return invalidf("limit %s: %v", quote(name), err)
}

// parseCost parses cost='s value: a whole number, or a template in braces
// (checked by Validate).
func parseCost(v string) (int, string, error) {
	switch {
	case v == "":
		return 0, "", nil
	case strings.HasPrefix(v, "{"):
		return 0, v, nil
	}
	n, err := parseCount(optCost, v)
	if err != nil {
		return 0, "", invalidf("cost %s is not a whole number from 1 to %d, nor a template such as {payload.tokens}", quote(v), maxCount)
	}
	return n, "", nil
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
// end; it has a Limit, Limits, or both, each named limit with a distinct
// name that passes workers.CheckName and holds no '=', ',' or spaces; the
// limits pass their Validate; KeyTemplate, if set, holds no ',' and no
// spaces at either end and passes workers.KeyTemplate; each of
// CostTemplates is for one of the limits, which has no Cost, and passes
// workers.CostTemplate ({body.FIELD} only for type http:request); MaxWait,
// Cost and InFlight are not negative, MaxWait is at most [MaxMaxWait], and
// InFlight passes [throttle.Concurrency.Validate] if set; and each Cost
// fits in its limit (the first limit's in Global too), or no job could ever
// be granted. The error matches [ErrInvalid].
func (s Spec) Validate() error {
	_, _, err := s.validate()
	return err
}

// validate is Validate, returning the policy's Key made from KeyTemplate and
// its cost funcs made from CostTemplates.
func (s Spec) validate() (workers.KeyFunc, map[string]workers.CostFunc, error) {
	switch {
	case s.Name == "":
		return nil, nil, invalidf("type is empty")
	case strings.TrimSpace(s.Name) != s.Name:
		return nil, nil, invalidf("type %s starts or ends with a space", quote(s.Name))
	case strings.ContainsAny(s.Name, "=,"):
		return nil, nil, invalidf("type %s must not contain '=' or ','", quote(s.Name))
	case s.Limit == nil && len(s.Limits) == 0:
		return nil, nil, invalidf("no limit")
	}
	if err := workers.CheckName(s.Name); err != nil {
		return nil, nil, invalidf("type %v", err)
	}
	all := s.All()
	costs := make(map[string]workers.CostFunc)
	names := make(map[string]bool, len(all))
	for i, l := range all {
		if err := s.validateLimit(l, i > 0 || s.Limit == nil, names); err != nil {
			return nil, nil, inLimit(l.Name, err)
		}
		if tmpl, ok := s.CostTemplates[l.Name]; ok {
			f, err := costOf(s.Name, tmpl)
			if err != nil {
				return nil, nil, inLimit(l.Name, err)
			}
			costs[l.Name] = f
		}
	}
	for name := range s.CostTemplates {
		if !names[name] {
			return nil, nil, invalidf("cost template for limit %s, which the type does not have", quote(name))
		}
	}
	for name, tmpl := range s.SettleTemplates {
		if name == "" || !names[name] {
			return nil, nil, invalidf("settle template for limit %s, which the type does not have as a named limit", quote(name))
		}
		if _, err := settleOf(s.Name, tmpl); err != nil {
			return nil, nil, inLimit(name, err)
		}
	}
	global, hasGlobal := globalOf(s)
	if s.Global != nil && !hasGlobal {
		return nil, nil, invalidf("global %T is not a token bucket (global= always is)", s.Global)
	}
	if hasGlobal {
		if err := validatePolicy("global ", global); err != nil {
			return nil, nil, err
		}
	}
	key, err := keyOf(s.KeyTemplate)
	if err != nil {
		return nil, nil, err
	}
	if err := validateFair(s); err != nil {
		return nil, nil, err
	}
	if err := validatePriorities(s); err != nil {
		return nil, nil, err
	}
	if s.MaxWait < 0 {
		return nil, nil, invalidf("max-wait %v must not be negative", s.MaxWait)
	}
	if s.MaxWait > MaxMaxWait {
		return nil, nil, invalidf("max-wait %v is longer than %v (a job would hold a worker slot that long)", s.MaxWait, MaxMaxWait)
	}
	switch {
	case hasGlobal && all[0].Cost > global.Burst:
		return nil, nil, invalidf("cost %d is larger than global burst %d: no job could ever run", all[0].Cost, global.Burst)
	}
	if err := validateFlight(s); err != nil {
		return nil, nil, err
	}
	return key, costs, nil
}

// validateLimit checks one of s's limits, named unless it is the unnamed
// Limit, and adds its name to names.
func (s Spec) validateLimit(l workers.NamedLimit, named bool, names map[string]bool) error {
	if named {
		switch {
		case l.Name == "":
			return invalidf("a limit of Limits has no name")
		case strings.TrimSpace(l.Name) != l.Name || strings.ContainsAny(l.Name, "=, "):
			return invalidf("name %s must not contain '=', ',' or spaces", quote(l.Name))
		case names[l.Name]:
			return invalidf("name given to two of its limits")
		}
		if err := workers.CheckName(l.Name); err != nil {
			return invalidf("name %v", err)
		}
	}
	names[l.Name] = true
	if err := validatePolicy("", l.Limit); err != nil {
		return err
	}
	_, hasTemplate := s.CostTemplates[l.Name]
	switch {
	case l.Cost < 0:
		return invalidf("cost %d must not be negative", l.Cost)
	case l.Cost > 0 && hasTemplate:
		return invalidf("cost %d and cost template %s both given (one or the other)", l.Cost, quote(s.CostTemplates[l.Name]))
	case l.Cost > mostOf(l.Limit):
		n, what := most(l.Limit)
		return invalidf("cost %d is larger than %s %d: no job could ever run", l.Cost, what, n)
	}
	return nil
}

// costOf checks a cost template of type typ and makes its CostFunc. Only
// what the spec's grammar needs is checked here (no ','; {body.FIELD} for
// http:request only); workers.CostTemplate checks the rest.
func costOf(typ, tmpl string) (workers.CostFunc, error) {
	switch {
	case strings.ContainsRune(tmpl, ','):
		return nil, invalidf("cost %s must not contain ','", quote(tmpl))
	case strings.HasPrefix(tmpl, "{body.") && typ != httpRequest:
		return nil, invalidf("cost %s: {body.FIELD} is for type %s, whose payload carries a request body", quote(tmpl), httpRequest)
	}
	f, err := workers.CostTemplate(tmpl)
	if err != nil {
		return nil, invalidf("%s", strings.TrimPrefix(err.Error(), "workers: "))
	}
	return f, nil
}

// settleOf checks a settle template of type typ and makes its SettleFunc:
// only type http:request reads an answer (internal/httpjob hands it to the
// pool); workers.SettleTemplate checks the rest.
func settleOf(typ, tmpl string) (workers.SettleFunc, error) {
	switch {
	case strings.ContainsRune(tmpl, ','):
		return nil, invalidf("settle %s must not contain ','", quote(tmpl))
	case typ != httpRequest:
		return nil, invalidf("settle %s is for type %s, whose job reads an answer", quote(tmpl), httpRequest)
	}
	f, err := workers.SettleTemplate(tmpl)
	if err != nil {
		return nil, invalidf("%s", strings.TrimPrefix(err.Error(), "workers: "))
	}
	return f, nil
}

// httpRequest is the type of sluice's http:request job (internal/httpjob),
// whose cost may come from its request body.
const httpRequest = "http:request"

// All lists s's limits in the order the pool takes them: the unnamed Limit
// (Name ""), if any, then Limits. The first is the type's own bucket.
func (s Spec) All() []workers.NamedLimit {
	out := make([]workers.NamedLimit, 0, len(s.Limits)+1)
	if s.Limit != nil {
		out = append(out, workers.NamedLimit{Limit: s.Limit, Cost: s.Cost, CostFrom: s.CostFrom})
	}
	return append(out, s.Limits...)
}

// finish validates s and gives its policy the Key and cost funcs its
// templates make: the last step of Parse and LoadFile.
func (s Spec) finish() (Spec, error) {
	key, costs, err := s.validate()
	if err != nil {
		return Spec{}, err
	}
	s = s.clone()
	s.Key = key
	s.CostFrom = costs[""]
	for i := range s.Limits {
		s.Limits[i].CostFrom = costs[s.Limits[i].Name]
		s.Limits[i].SettleFrom = nil
		if tmpl, ok := s.SettleTemplates[s.Limits[i].Name]; ok {
			s.Limits[i].SettleFrom, _ = settleOf(s.Name, tmpl) // validate checked it
		}
	}
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
// (the burst too), so that Parse(s.String()) gives s back for any Spec of
// one limit that Parse or LoadFile returned. A Spec of several limits is
// written as its Flags, separated by spaces, for people to read; ParseAll
// reads its Flags back.
func (s Spec) String() string { return strings.Join(s.Flags(), " ") }

// Flags returns s as specs, one per limit, in the grammar Parse reads: the
// first carries the options of the type. ParseAll(s.Flags()) gives s back
// for any Spec that Parse, ParseAll or LoadFile returned.
func (s Spec) Flags() []string {
	all := s.All()
	out := make([]string, 0, len(all))
	for i, l := range all {
		var b strings.Builder
		b.WriteString(s.Name)
		b.WriteByte('=')
		sh, rate, period := shapeOf(l.Limit)
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
		if l.Name != "" {
			fmt.Fprintf(&b, ",%s=%s", optName, l.Name)
		}
		if i == 0 {
			s.writeType(&b, l)
		} else {
			s.writeCost(&b, l)
		}
		out = append(out, b.String())
	}
	return out
}

// writeCost writes the cost= of limit l, if not the default.
func (s Spec) writeCost(b *strings.Builder, l workers.NamedLimit) {
	if tmpl, ok := s.CostTemplates[l.Name]; ok {
		fmt.Fprintf(b, ",%s=%s", optCost, tmpl)
	} else if l.Cost != 0 {
		fmt.Fprintf(b, ",%s=%d", optCost, l.Cost)
	}
	if tmpl, ok := s.SettleTemplates[l.Name]; ok && l.Name != "" {
		fmt.Fprintf(b, ",%s=%s", optSettle, tmpl)
	}
}

// writeType writes the options of s's type, and the cost of first, its
// first limit, among them (in the order a spec of one limit always had).
func (s Spec) writeType(b *strings.Builder, first workers.NamedLimit) {
	if s.KeyTemplate != "" {
		fmt.Fprintf(b, ",%s=%s", optKey, s.KeyTemplate)
	}
	if s.MaxWait != 0 {
		fmt.Fprintf(b, ",%s=%v", optMaxWait, s.MaxWait)
	}
	s.writeCost(b, first)
	if g, ok := globalOf(s); ok {
		fmt.Fprintf(b, ",%s=", optGlobal)
		writeRate(b, g.Rate, g.Period)
		fmt.Fprintf(b, ":%d", g.Burst)
	}
	writeFlight(b, s)
	switch target := adaptTarget(s); {
	case s.AdaptKey:
		fmt.Fprintf(b, ",%s=%s", optAdapt, adaptKey)
	case adaptsByDefault(target) && !s.Adapt:
		fmt.Fprintf(b, ",%s=off", optAdapt)
	}
	if s.AdaptFloor > 0 {
		_, _, period := shapeOf(adaptTarget(s))
		fmt.Fprintf(b, ",%s=", optFloor)
		writeRate(b, s.AdaptFloor, period)
	}
	writeFair(b, s)
	writePriorities(b, s)
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
