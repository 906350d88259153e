package workers

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
)

// Policy says how the jobs of one task type are throttled: which bucket each
// job takes tokens from, how many, and how long it may wait in the worker for
// them before it goes back to the queue to come back at its turn.
//
// With Key nil every job shares one bucket named Name. With Key set each job's
// bucket is the key Key derives from it, say one per tenant; a task's
// queue.HeaderKey is not used unless Key reads it (KeyTemplate("{header.sluice-key}")),
// so that whoever enqueues cannot split a shared bucket.
//
// With Global set, each job also takes Cost tokens from one bucket shared by
// every key of the policy, in the same call, all or nothing. The two buckets
// must then share a Redis Cluster hash tag, so the keys are laid out as
// "{<Name>}:<derived key>" and "{<Name>}:*global*": all of one policy's
// buckets live in one Cluster slot. Without Global the derived key is used as
// it is, and each key lands in a slot of its own.
//
// With Limits set, each job takes from several buckets of its own, one per
// named limit, together with Limit's (if set) and Global, in one call, all
// or nothing: requests and tokens per minute, say, or 3/s and 100/min and
// 2,000/day. The first of them (Limit, else Limits[0]) is the job's own
// bucket: an upstream's cooldown and Adapt (unless they go to Global, see
// Adapt), the InFlight semaphore and Global's cost follow it. A policy with
// named limits keeps all its buckets under the hash tag of its Name, as with
// Global (see BucketKey).
//
// With InFlight set, a job that got its turn also holds one of InFlight slots
// of a semaphore shared by the fleet (a throttle.Concurrency) while its
// handler runs: "at most 5 of these jobs at once". The semaphore is the
// job's bucket key plus ":inflight", so with Key set it is one per derived
// key, say per tenant, and with Global it keeps the policy's hash tag.
type Policy struct {
	// Name labels the policy in metrics, spans and logs, so it must come from a
	// small set; it is also the bucket key when Key is nil. Required: at most
	// 64 bytes, no braces or control characters.
	Name string
	// Limit is the policy of the bucket each job takes from: any
	// throttle.Policy (a throttle.Limit token bucket, or FixedWindow,
	// SlidingLog, SlidingWindow, LeakyBucket). It is the policy's unnamed
	// limit; it may be nil only when Limits holds at least one.
	Limit throttle.Policy
	// Limits are more limits every job takes from, each named and with a
	// bucket of its own, together with Limit in one call (see NamedLimit).
	Limits []NamedLimit
	// Key derives a job's bucket key from its task; nil means Name. A Key that
	// fails archives the job with an error matching ErrKey.
	Key KeyFunc
	// Global, if set, is one more bucket shared by every key of this policy,
	// of any policy (a *throttle.Limit, as before, is taken as its value).
	Global throttle.Policy
	// Cost is the tokens each job takes from Limit's bucket (and from
	// Global's); 0 means 1. A task's queue.HeaderCost overrides the first
	// limit's Cost, unless it has a CostFrom.
	Cost int
	// CostFrom, if set, reads each job's cost for Limit's bucket (and
	// Global's) from its task instead of Cost (see NamedLimit.CostFrom).
	CostFrom CostFunc
	// MaxWait is how long a job may wait in the worker for its turn; 0 means
	// Config.MaxWait. A job with InFlight set may then wait for a slot, no
	// longer than MaxWait and than its turn stays fresh: half the time the
	// tighter of Limit and Global takes to grant its whole quota (at least
	// 10ms, at most 2s), as long as a ticket may be late.
	MaxWait time.Duration
	// InFlight, if positive, is the most jobs of one bucket key of this
	// policy that run at once across the fleet; 0 means no bound. A job that
	// finds no free slot within MaxWait goes back to the queue, like a job
	// whose turn is too far off (its turn is spent), and a job whose slot is
	// lost (its worker was cut off from Redis for longer than the lease) has
	// its handler's context cancelled. At most 1<<20.
	InFlight int
	// InFlightAuto makes the in-flight bound follow the upstream's latency
	// (throttle.Concurrency.Auto): the fleet shares one bound per
	// semaphore, kept in Redis beside its slots, from InFlightFloor (0
	// means 1) up to InFlight, the ceiling (0 means 1000). Each job's
	// handler time is its sample; an *UpstreamError (a 429 or 503) or a
	// handler that ran out of time is an overload answer, which lowers it.
	// With a rate limit too, the tighter binds. See docs/adaptive.md.
	InFlightAuto  bool
	InFlightFloor int
	// InFlightLease is how long a slot stays taken after the worker holding
	// it dies: the lease is renewed every third of it while the handler
	// runs. 0 means 30s (throttle.Concurrency's default); else from 100ms to 24h.
	InFlightLease time.Duration
	// Adapt makes the upstream's bucket adaptive (throttle.Adaptive): its
	// limit, which must then be a throttle.Limit, is the ceiling; an
	// upstream's refusal (an *UpstreamError) lowers the fleet's effective
	// rate for the bucket, and successful jobs raise it back. AdaptFloor is
	// the least rate, per that limit's Period (0: a tenth of it).
	//
	// The upstream's bucket is the one its refusals (the cooldown of an
	// *UpstreamError) and announcements (ObserveResponse) apply to: the
	// job's own bucket (Limit, else Limits[0]), or with Key and Global,
	// Global, since an upstream's limit is the account every key shares.
	// AdaptKey says the upstream gives each key its own quota (each tenant
	// calls with its own API key): they apply to the key's own bucket, as
	// without Global.
	Adapt      bool
	AdaptFloor float64
	AdaptKey   bool
	// Fair shares Global among the keys Key derives (tenants) by weight:
	// while several keys have jobs, each gets its share of Global's rate,
	// and a key alone gets all of it (throttle.Share). A job of a key that
	// is over its share goes back to the queue without a turn and comes
	// back at its place in its key's line. It needs Key and Global.
	Fair bool
	// Weights are the keys' weights under Fair, by derived key; a key not
	// listed weighs 1. Each from 1 to throttle.MaxShareWeight.
	Weights map[string]int
	// FairHorizon is how far ahead of now one key may book Global under
	// Fair, and one priority level the bucket it shares under Priorities;
	// 0 means the time that bucket takes to grant half of
	// Config.Concurrency tokens, at most 500ms (see fairHorizon).
	FairHorizon time.Duration
	// Priorities grants the bucket's turns by each job's priority
	// (queue.Meta.Priority, 1 first to 5 last, 3 without one): a job of a
	// higher priority books first, behind at most the horizon already
	// booked, and the priorities below the highest with work keep
	// PriorityFloor of the rate while they have work (docs/priorities.md).
	// The levels share Global under Fair (each key's weight holding within
	// its level), else Global with Global set, else the job's own bucket
	// (the first limit's, per key with Key). A job over its level's share
	// goes back without a turn to come back at its place, as under Fair.
	Priorities bool
	// PriorityFloor is the part of the rate the priorities below the
	// highest with work keep together under Priorities, from 0.001 to 0.5;
	// 0 means 0.05.
	PriorityFloor float64
}

// NamedLimit is one of a Policy's named limits: a bucket of its own that
// every job of the policy takes from, with the policy's other buckets in one
// call, all or nothing (Policy.Limits).
type NamedLimit struct {
	// Name names the limit among its policy's, in its bucket's key
	// (BucketKey), metrics and logs: "requests", "tokens", "daily".
	// Required, distinct within the policy, and a valid Policy Name
	// (CheckName).
	Name string
	// Limit is the bucket's policy, any throttle.Policy. Required.
	Limit throttle.Policy
	// Cost is the tokens each job takes from the bucket; 0 means 1.
	Cost int
	// CostFrom, if set, reads each job's cost from its task instead of Cost,
	// such as the max_tokens of an LLM request (CostTemplate builds one). A
	// job whose cost cannot be read, or is less than 1 or more than the
	// limit grants at once, is archived with an error matching ErrCost.
	CostFrom CostFunc
	// SettleFrom, if set, reads what a job really used of the limit from
	// its handler's answer (ObserveUsage), such as the usage of an LLM call
	// (SettleTemplate builds one): once the handler returns nil, the job's
	// turn is settled at that cost, the difference from its estimate going
	// back to the bucket or taken on top (throttle.Reservation.Settle). A
	// value that cannot be read leaves the estimate charged, with a warning
	// once per policy. A job that ran on a ticket (its turn booked before it
	// was sent back) stays charged its estimate.
	SettleFrom SettleFunc
}

// CostFunc reads the tokens a job costs from its task. CostTemplate builds
// one from a placeholder such as "{payload.max_tokens}".
type CostFunc func(t *asynq.Task) (int, error)

// KeyFunc derives a job's bucket key from its task, e.g. a tenant id read
// from the payload. KeyTemplate builds one from a pattern. The key should come
// from a bounded, trusted set, or be made safe like KeyTemplate's values.
type KeyFunc func(t *asynq.Task) (string, error)

const (
	// MaxPolicyName bounds Policy.Name, in bytes.
	MaxPolicyName = 64
	// globalName is the derived-key part of a policy's global bucket.
	globalName = "*global*"
	// inFlightSuffix makes a job's bucket key the key of its in-flight semaphore.
	inFlightSuffix = ":inflight"
)

// bounded reports whether p's jobs hold in-flight slots: InFlight or InFlightAuto.
func (p *policy) bounded() bool { return p.slots.Max > 0 || p.slots.Auto }

// policy is a checked copy of a Policy.
type policy struct {
	Policy
	limits   []NamedLimit         // Limit (named "") if set, then Limits: the buckets every job takes
	adaptive *throttle.Adaptive   // when Adapt: the ceiling and floor of the upstream's bucket
	upGlobal bool                 // the upstream's bucket is Global (Key and Global, without AdaptKey)
	global   throttle.Policy      // Policy.Global, nil if none
	maxWait  time.Duration        // Policy.MaxWait or Config.MaxWait
	slots    throttle.Concurrency // InFlight, InFlightLease, InFlightAuto and InFlightFloor; Max 0 and not Auto without them
	fp       string               // fingerprint of the limits, for the tickets booked under them
	late     time.Duration        // how late past its slot a ticket is still honoured (see lateTicket)
	settles  bool                 // a limit has a SettleFrom: its jobs are charged what they used (charge)
	// tokens are the limits (by index, never the first) named for the
	// upstream's quotas of tokens, which adapt to its announcements of
	// them (tokens.go); none without Adapt, or when the upstream's bucket
	// is Global.
	tokens map[backoff.Resource]int
	quota  []throttle.FixedWindow // its calendar quotas, among limits and Global: its jobs park for their resets (quota.go)
}

// CheckName reports why name cannot be a Policy's Name, or nil: it is
// required, at most MaxPolicyName bytes, and free of braces (it names the
// policy's buckets, whose Cluster hash tag it becomes) and control characters.
// The error reads after the word for the name: "Name is required", "type
// is 70 bytes, more than 64: ...". A pool checks every Policy's Name with
// it; a program that takes names from its users may check them first.
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("is required")
	case len(name) > MaxPolicyName:
		return fmt.Errorf("is %d bytes, more than %d: it names the policy in metrics and logs", len(name), MaxPolicyName)
	case strings.ContainsAny(name, "{}"):
		return fmt.Errorf("%q must not contain braces: it names the policy's buckets", name)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%q contains a control character", name)
	}
	return nil
}

// fingerprint names the limits of p (policies, costs, in-flight bound) in a
// short string: a ticket booked under other limits is void.
func fingerprint(p *policy) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%s|%d|%#v|%v|%g", printed(p.Limit), printed(p.global), p.Cost, p.slots, p.Adapt, p.AdaptFloor)
	for _, l := range p.limits {
		if l.Name != "" {
			fmt.Fprintf(h, "|%s %s %d %v", l.Name, printed(l.Limit), l.Cost, l.CostFrom != nil)
		}
	}
	switch {
	case p.AdaptKey:
		fmt.Fprint(h, "|adapt key")
	case p.upGlobal && p.Adapt:
		// Turns booked while the key's own bucket adapted are void.
		fmt.Fprint(h, "|adapt global")
	}
	if p.Fair {
		// fmt prints a map's keys sorted: the same weights, the same print.
		fmt.Fprintf(h, "|fair %v %v", p.Weights, p.FairHorizon)
	}
	if p.Priorities {
		// A turn booked far ahead without priorities is what an urgent job
		// would queue behind.
		fmt.Fprintf(h, "|priorities %g %v", p.PriorityFloor, p.FairHorizon)
	}
	return strconv.FormatUint(h.Sum64(), 36)
}

// newPolicy checks pol and returns a copy of it, with defaultWait as its
// MaxWait if it has none, and under Fair a FairHorizon for a process of
// concurrency slots if it has none (fairHorizon).
func newPolicy(pol Policy, defaultWait time.Duration, concurrency int) (*policy, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := CheckName(pol.Name); err != nil {
		bad("Name %w", err)
	}
	if g, ok := pol.Global.(*throttle.Limit); ok && g != nil {
		pol.Global = *g // a copy: the caller's value may change after
	}
	checkPolicy := func(name string, p throttle.Policy, cost int) {
		if err := validate(p); err != nil {
			bad("%s: %w", name, err)
		} else if most, _ := throttle.QuotaOf(p); cost > most {
			bad("Cost %d is larger than %s's %s %d: no job could ever run", cost, name, quotaName(p), most)
		}
	}
	limits, err := limitsOf(pol)
	if err != nil {
		bad("%w", err)
	}
	for i, l := range limits {
		what := "Limit"
		if l.Name != "" {
			what = fmt.Sprintf("Limits[%d] (%q)", i-len(limits)+len(pol.Limits), l.Name)
		}
		checkPolicy(what, l.Limit, l.Cost)
		if l.Cost < 0 {
			bad("%s: Cost %d must not be negative", what, l.Cost)
		}
	}
	if !isNil(pol.Global) && len(limits) > 0 {
		checkPolicy("Global", pol.Global, limits[0].Cost)
	}
	if pol.MaxWait < 0 {
		bad("MaxWait %v must not be negative", pol.MaxWait)
	}
	slots := throttle.Concurrency{Max: pol.InFlight, Lease: pol.InFlightLease, Auto: pol.InFlightAuto, Floor: pol.InFlightFloor}
	switch {
	case pol.InFlight < 0:
		bad("InFlight %d must not be negative", pol.InFlight)
	case pol.InFlight > 0 || pol.InFlightAuto:
		if err := slots.Validate(); err != nil {
			bad("InFlight: %w", err)
		}
	case pol.InFlightLease != 0:
		bad("InFlightLease %v is set without InFlight", pol.InFlightLease)
	case pol.InFlightFloor != 0:
		bad("InFlightFloor %d is set without InFlightAuto", pol.InFlightFloor)
	}
	if pol.Fair {
		switch {
		case pol.Key == nil:
			bad("Fair needs Key: it shares Global among the keys Key derives")
		case isNil(pol.Global):
			bad("Fair needs Global: the bucket it shares among keys")
		}
		for k, w := range pol.Weights {
			if w < 1 || w > throttle.MaxShareWeight {
				bad("Weights[%q] %d is not between 1 and %d", k, w, throttle.MaxShareWeight)
			}
		}
		if pol.FairHorizon < 0 || pol.FairHorizon > throttle.MaxShareHorizon {
			bad("FairHorizon %v is not between 0 and %v", pol.FairHorizon, throttle.MaxShareHorizon)
		}
	} else if len(pol.Weights) > 0 {
		bad("Weights are set without Fair")
	}
	if pol.Priorities || pol.PriorityFloor != 0 {
		checkPriorities(pol, bad)
	}
	if pol.AdaptKey && (pol.Key == nil || isNil(pol.Global)) {
		bad("AdaptKey needs Key and Global: it keeps the upstream's signals on each key's own bucket instead of Global")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("policy %q: %w", pol.Name, err)
	}
	p := &policy{Policy: pol, maxWait: or(pol.MaxWait, defaultWait), slots: slots, limits: limits}
	if pol.Weights != nil {
		p.Weights = make(map[string]int, len(pol.Weights)) // a copy: the caller's map may change after
		for k, w := range pol.Weights {
			p.Weights[k] = w
		}
	}
	if !isNil(pol.Global) {
		p.global = pol.Global
	} else {
		p.Global = nil
	}
	p.upGlobal = pol.Key != nil && p.global != nil && !pol.AdaptKey
	if pol.Adapt {
		ceiling, field := p.limits[0].Limit, "its first limit"
		if p.upGlobal {
			ceiling, field = p.global, "Global"
		}
		l, ok := limitOf(ceiling)
		if !ok {
			return nil, fmt.Errorf("policy %q: Adapt needs a token bucket (throttle.Limit) as %s, not %T", pol.Name, field, ceiling)
		}
		a := throttle.Adaptive{Ceiling: l, Floor: pol.AdaptFloor}
		if err := throttle.Validate(a); err != nil {
			return nil, fmt.Errorf("policy %q: %w", pol.Name, err)
		}
		p.adaptive = &a
	}
	p.tokens = tokenLimits(p)
	p.fp = fingerprint(p)
	p.late = lateTicket(p.limits, p.global)
	p.settles = slices.ContainsFunc(p.limits, func(l NamedLimit) bool { return l.SettleFrom != nil })
	p.quota = p.quotas()
	if (p.Fair || p.Priorities) && p.FairHorizon == 0 {
		// After the fingerprint: processes of other concurrencies share
		// one set of limits.
		p.FairHorizon = fairHorizon(p.shared(), concurrency)
	}
	return p, nil
}

// limitsOf lists pol's limits: Limit (named "") if set, then Limits, each
// checked for a valid, distinct Name; a nil Limit is an error without Limits.
func limitsOf(pol Policy) ([]NamedLimit, error) {
	var out []NamedLimit
	if !isNil(pol.Limit) || len(pol.Limits) == 0 {
		out = append(out, NamedLimit{Limit: pol.Limit, Cost: pol.Cost, CostFrom: pol.CostFrom})
	}
	var errs []error
	seen := make(map[string]bool, len(pol.Limits))
	for i, l := range pol.Limits {
		if err := CheckName(l.Name); err != nil {
			errs = append(errs, fmt.Errorf("Limits[%d]: Name %w", i, err))
		} else if seen[l.Name] {
			errs = append(errs, fmt.Errorf("Limits[%d]: Name %q is given twice", i, l.Name))
		}
		seen[l.Name] = true
		if g, ok := l.Limit.(*throttle.Limit); ok && g != nil {
			l.Limit = *g // a copy, as Global's
		}
		out = append(out, l)
	}
	return out, errors.Join(errs...)
}

// lateTicket is how late past its slot a ticket of a job taking from limits
// (and global, if not nil) is still honoured: half the time the tightest of
// them takes to grant its whole quota (a token bucket's burst, a window's
// Max), within [minLateTicket, maxLateTicket]. A come-back is a little late
// when a forwarder's tick or a busy pool delays it; much later (a stopped
// Redis, a saturated fleet), every overdue ticket would run at once, and
// more than half a burst of them, on top of the turns due then, would pass
// the limit at the upstream. A later ticket gives its turn up (its tokens
// wasted, never granted twice) and its job takes a new one.
func lateTicket(limits []NamedLimit, global throttle.Policy) time.Duration {
	span := time.Duration(math.MaxInt64)
	for _, l := range limits {
		_, s := throttle.QuotaOf(l.Limit)
		span = min(span, s)
	}
	if global != nil {
		_, g := throttle.QuotaOf(global)
		span = min(span, g)
	}
	return min(max(span/2, minLateTicket), maxLateTicket)
}

const (
	minLateTicket = 50 * time.Millisecond
	maxLateTicket = 2 * time.Second
)

// validate is throttle.Validate(p), with a nil policy (or a nil pointer to one) an error.
func validate(p throttle.Policy) error {
	if isNil(p) {
		return errors.New("is nil")
	}
	return throttle.Validate(p)
}

// isNil reports a nil policy, or a nil pointer to one of throttle's.
func isNil(p throttle.Policy) bool {
	if p == nil {
		return true
	}
	v := reflect.ValueOf(p)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// quotaName names what a policy's Quota counts, for messages.
func quotaName(p throttle.Policy) string {
	switch p.(type) {
	case throttle.Limit, *throttle.Limit:
		return "burst"
	case throttle.LeakyBucket, *throttle.LeakyBucket:
		return "capacity"
	}
	return "max"
}

// buckets returns the buckets job t takes tokens from, and the key of its own
// bucket. The upstream's bucket, which its cooldowns and announcements apply
// to, is the first, or with upGlobal the last, Global (upstreamOf). An error
// matches ErrKey or ErrCost.
func (p *policy) buckets(t *asynq.Task, m queue.Meta) ([]throttle.Bucket, string, error) {
	key, err := p.derive(t)
	if err != nil {
		return nil, "", fmt.Errorf("%w: policy %q: %w", ErrKey, p.Name, err)
	}
	bs := make([]throttle.Bucket, 0, len(p.limits)+1)
	for i, l := range p.limits {
		n, err := p.cost(t, m, i)
		if err != nil {
			return nil, "", err
		}
		var lim throttle.Policy = l.Limit
		if i == 0 && p.adaptive != nil && !p.upGlobal {
			lim = *p.adaptive // taken at the fleet's effective rate, read by the same call
		} else if a, ok := p.tokenAdaptive(i); ok {
			lim = a // at the rate the upstream announced for its tokens (tokens.go)
		}
		b := BucketKey(p.Policy, key, l.Name)
		if len(b) > throttle.MaxKeyLen {
			return nil, "", fmt.Errorf("%w: policy %q: key is %d bytes, more than %d", ErrKey, p.Name, len(key), throttle.MaxKeyLen-len(b)+len(key))
		}
		// A settled limit gives back what the job did not use as the
		// upstream does when it answers (charge.go).
		bs = append(bs, throttle.Bucket{Key: b, Limit: lim, N: n, UpstreamSettle: l.SettleFrom != nil})
	}
	if p.global != nil {
		g := throttle.Bucket{Key: GlobalKey(p.Policy), Limit: p.global, N: bs[0].N}
		if p.adaptive != nil && p.upGlobal {
			g.Limit = *p.adaptive
		}
		if most, _ := throttle.QuotaOf(p.global); g.N > most {
			return nil, "", fmt.Errorf("%w: policy %q: cost %d is more than Global's %s %d", ErrCost, p.Name, g.N, quotaName(p.global), most)
		}
		bs = append(bs, g)
	}
	p.share(bs, key, m)
	return bs, bs[0].Key, nil
}

// upstreamOf is the index in bs, what buckets returned, of the upstream's bucket.
func (p *policy) upstreamOf(bs []throttle.Bucket) int {
	if p.upGlobal {
		return len(bs) - 1
	}
	return 0
}

// cost is what job t takes from the i-th of p's limits: its CostFrom's
// reading of t, else for the first limit the task's queue.HeaderCost, else
// its Cost (0 means 1). A cost that cannot be read, or that the limit could
// never grant, is an error matching ErrCost.
func (p *policy) cost(t *asynq.Task, m queue.Meta, i int) (int, error) {
	l := p.limits[i]
	what := fmt.Sprintf("policy %q", p.Name)
	if l.Name != "" {
		what += fmt.Sprintf(": limit %q", l.Name)
	}
	n := max(l.Cost, 1)
	switch {
	case l.CostFrom != nil:
		var err error
		if n, err = readCost(l.CostFrom, t); err != nil {
			return 0, fmt.Errorf("%w: %s: %w", ErrCost, what, err)
		}
	case i == 0 && m.Cost > 0:
		n = m.Cost
	}
	if most, _ := throttle.QuotaOf(l.Limit); n > most {
		return 0, fmt.Errorf("%w: %s: cost %d is more than its %s %d", ErrCost, what, n, quotaName(l.Limit), most)
	}
	return n, nil
}

// readCost runs f on t; a panic is an error like any other, as is a cost
// less than 1 (throttle grants no fewer).
func readCost(f CostFunc, t *asynq.Task) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = 0, fmt.Errorf("cost func panicked: %v", r)
		}
	}()
	if n, err = f(t); err == nil && n < 1 {
		err = fmt.Errorf("cost %d is less than 1", n)
	}
	return n, err
}

// BucketKey names the bucket of the limit named limit ("" for Policy.Limit,
// else a NamedLimit's Name) that a job of pol whose key is key (what pol.Key
// derived, or pol.Name without a key template) takes its tokens from:
//
//   - key itself, for a policy with one unnamed limit and no Global;
//   - "{name}:key" for the unnamed limit of a policy with Global or named
//     limits, so that all of a job's buckets share a Cluster slot;
//   - "{name}{limit}:key" for a named limit, which no key of the unnamed
//     limit or of Global can be.
//
// It is the one place a bucket's key is named: the pool takes tokens there,
// and a program that reads a bucket (Limiter.Peek, Limiter.AdaptiveLimit,
// Limiter.CooldownLeft) names it with BucketKey too.
func BucketKey(pol Policy, key, limit string) string {
	switch {
	case limit != "":
		return "{" + pol.Name + "}{" + limit + "}:" + key
	case isNil(pol.Global) && len(pol.Limits) == 0:
		return key
	}
	return "{" + pol.Name + "}:" + key
}

// fairHorizon is the default FairHorizon for a process of concurrency slots
// under global: the time global takes to grant half as many tokens as the
// slots, at most maxFairHorizon and at least a millisecond.
// A key's jobs whose turns are booked wait for them in the slots, and asynq
// hands jobs out in the order they were queued: if one key could book
// further ahead than the slots hold, its backlog would fill every slot
// within its share, and another key's jobs, queued behind, would never be
// fetched. Half the slots leaves the other half fetching.
func fairHorizon(global throttle.Policy, concurrency int) time.Duration {
	count, period := throttle.QuotaOf(global)
	perToken := period / time.Duration(count)
	h := perToken * time.Duration(max(concurrency, 1)) / 2
	return min(max(h, time.Millisecond), maxFairHorizon)
}

// maxFairHorizon caps the default FairHorizon: throttle's default Share
// horizon.
const maxFairHorizon = 500 * time.Millisecond

// GlobalKey is the bucket pol's Global is kept in, "{name}:*global*", for a
// program that reads it (Limiter.Peek, Limiter.Shares); "" without Global.
// It is BucketKey of the global bucket's own key.
func GlobalKey(pol Policy) string {
	if isNil(pol.Global) {
		return ""
	}
	return BucketKey(pol, globalName, "")
}

// inFlightKey is the key of the in-flight semaphore of a job whose own bucket
// is key. An error matches ErrKey.
func (p *policy) inFlightKey(key string) (string, error) {
	sem := key + inFlightSuffix
	if len(sem) > throttle.MaxKeyLen {
		return "", fmt.Errorf("%w: policy %q: key is %d bytes, more than the %d an in-flight bound allows",
			ErrKey, p.Name, len(key), throttle.MaxKeyLen-len(inFlightSuffix))
	}
	return sem, nil
}

// derive runs the policy's KeyFunc, or returns Name without one. A KeyFunc
// that panics is an error like any other: the job is archived with the reason.
func (p *policy) derive(t *asynq.Task) (key string, err error) {
	if p.Key == nil {
		return p.Name, nil
	}
	defer func() {
		if r := recover(); r != nil {
			key, err = "", fmt.Errorf("key func panicked: %v", r)
		}
	}()
	key, err = p.Key(t)
	switch {
	case err != nil:
		return "", err
	case key == "":
		return "", errors.New("key func returned an empty key")
	case len(key) > throttle.MaxKeyLen:
		return "", fmt.Errorf("key is %d bytes, more than %d", len(key), throttle.MaxKeyLen)
	case p.global != nil && key == globalName:
		return "", fmt.Errorf("key %q is the name of the policy's global bucket", key)
	}
	return key, nil
}

// limitOf is p as a throttle.Limit, if it is one.
func limitOf(p throttle.Policy) (throttle.Limit, bool) {
	switch l := p.(type) {
	case throttle.Limit:
		return l, true
	case *throttle.Limit:
		if l != nil {
			return *l, true
		}
	}
	return throttle.Limit{}, false
}

// InFlightOf is the in-flight semaphore of pol's jobs and its bound, for a
// policy without Key (one semaphore): what throttle.Limiter.InFlight reads
// to show an automatic bound. The key is "" for a policy with Key, or
// without InFlight or InFlightAuto.
func InFlightOf(pol Policy) (string, throttle.Concurrency) {
	c := throttle.Concurrency{Max: pol.InFlight, Lease: pol.InFlightLease, Auto: pol.InFlightAuto, Floor: pol.InFlightFloor}
	if pol.Key != nil || (c.Max <= 0 && !c.Auto) {
		return "", c
	}
	limit := ""
	if pol.Limit == nil && len(pol.Limits) > 0 {
		limit = pol.Limits[0].Name
	}
	return BucketKey(pol, pol.Name, limit) + inFlightSuffix, c
}
