package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/limitspec"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// fleet is the limiter's Redis as the sluice command sees it.
type fleet struct {
	rdb  redis.UniversalClient
	ctl  *control.Control
	lim  *throttle.Limiter
	qrdb redis.UniversalClient // the queues' Redis: rdb unless --queue-redis
	insp *asynq.Inspector
	// prefix is the workers' key prefix (--key-prefix), which their
	// history rings are kept under too.
	prefix string
}

func connect(ctx context.Context, opts options) (*fleet, error) {
	if opts.redisURL == "" {
		return nil, cli.Usagef("no Redis: pass --redis or set SLUICE_REDIS or REDIS_URL")
	}
	r, err := cli.ParseRedis(opts.redisURL)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := r.Ping(pctx); err != nil {
		return nil, err
	}
	rdb := r.Client()
	lim := throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix(opts.keyPrefix))
	if err := lim.Err(); err != nil {
		rdb.Close()
		return nil, cli.Usagef("%w", err)
	}
	f := &fleet{rdb: rdb, ctl: control.New(rdb, opts.keyPrefix), lim: lim, qrdb: rdb, prefix: opts.keyPrefix}
	if opts.queueURL != "" {
		qr, err := cli.ParseRedis(opts.queueURL)
		if err != nil {
			rdb.Close()
			return nil, cli.Usagef("--queue-redis: %w", err)
		}
		f.qrdb = qr.Client()
	}
	f.insp = asynq.NewInspectorFromRedisClient(f.qrdb)
	return f, nil
}

func (f *fleet) close() {
	if f.qrdb != f.rdb {
		f.qrdb.Close()
	}
	f.rdb.Close()
}

// queues reads the depths of the named queues, each summed over its family
// (a member per job priority and lane: queue.Family), with the jobs queued
// at each priority; a queue that cannot be read is left out, with its
// error (queue.Depths).
func (f *fleet) queues(names []string) ([]queueView, []error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	ds, errs := queue.Depths(ctx, f.qrdb, names)
	var out []queueView
	for _, d := range ds {
		v := queueView{Name: d.Name, Pending: d.Pending, Scheduled: d.Scheduled, Retry: d.Retry, Active: d.Active, Archived: d.Archived}
		for i, n := range d.ByPriority {
			if n > 0 {
				if v.ByPriority == nil {
					v.ByPriority = make(map[string]int)
				}
				v.ByPriority[strconv.Itoa(i+queue.HighestPriority)] = n
			}
		}
		out = append(out, v)
	}
	return out, errs
}

// membersWith counts the jobs in state (archived, scheduled) of each member
// of queue's family, the members with none left out, in one pipeline.
func (f *fleet) membersWith(ctx context.Context, queueName, state string) (map[string]int, error) {
	members := queue.Family(queueName)
	cmds := make([]*redis.IntCmd, len(members))
	_, err := f.qrdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range members {
			cmds[i] = p.ZCard(ctx, "asynq:{"+m+"}:"+state)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("queue %s: %w", queueName, err)
	}
	out := make(map[string]int)
	for i, c := range cmds {
		if n := int(c.Val()); n > 0 {
			out[members[i]] = n
		}
	}
	return out, nil
}

// limitView is one limit as the fleet applies it: a type's, or one of a
// type's several (Limit names it; "" for the type's unnamed limit). The
// type's own bucket, its first limit, comes first, and carries the
// adaptive rate and the fair shares.
type limitView struct {
	Type   string `json:"type"`
	Limit  string `json:"limit,omitempty"`
	Policy string `json:"policy"`
	Spec   string `json:"spec"` // of this limit, with the type's options if it is the first
	// Specs are every limit of the type, one spec each, when it has more
	// than one (what sluice set takes back).
	Specs  []string  `json:"specs,omitempty"`
	Source string    `json:"source"` // runtime, or what the workers say (flag, file)
	SetBy  string    `json:"set_by,omitempty"`
	SetAt  time.Time `json:"set_at,omitzero"` // when the runtime limit was set
	// Malformed says why a runtime entry does not parse (written by another
	// version, or by hand): no worker applies it.
	Malformed string  `json:"malformed,omitempty"`
	Keyed     bool    `json:"keyed"`                // a bucket per key: no one bucket to show
	Tokens    *int    `json:"tokens,omitempty"`     // left in the type's bucket
	Cooldown  float64 `json:"cooldown_s,omitempty"` // left on it
	Grants    float64 `json:"grants_per_s"`         // over the last minute, all workers
	Waiting   int64   `json:"waiting"`              // jobs waiting for their turn in the workers now
	// WaitingByPriority splits Waiting by job priority ("1" to "5"); the
	// priorities with none are left out.
	WaitingByPriority map[string]int64 `json:"waiting_by_priority,omitempty"`
	Queued            *int             `json:"queued,omitempty"` // pending, scheduled and retry in the queues its workers serve
	Queues            []string         `json:"queues,omitempty"` // those queues
	// QueuedByPriority splits Queued by job priority ("1" to "5"); the
	// priorities with none are left out.
	QueuedByPriority map[string]int `json:"queued_by_priority,omitempty"`
	RatePerS         float64        `json:"rate_per_s"` // the limit, in grants per second (per key when Keyed)
	// Effective is an adaptive limit's effective rate per second, and why it
	// last moved (docs/adaptive.md): of its own bucket, or with a key
	// template of its global bucket, which the upstream's answers set;
	// absent for a limit that does not adapt or adapts a bucket per key
	// (adapt=key).
	Effective    float64 `json:"effective_per_s,omitempty"`
	EffectiveWhy string  `json:"effective_why,omitempty"`
	Workers      int     `json:"workers"`            // applying this spec
	Conflict     bool    `json:"conflict,omitempty"` // workers apply different specs
	// Tenants are the keys sharing the global bucket of a fair limit that
	// have turns ahead (docs/fairness.md): the first maxTenants of them,
	// furthest ahead first, of TenantCount.
	Tenants     []tenantView `json:"tenants,omitempty"`
	TenantCount int          `json:"tenant_count,omitempty"`
	// Levels are the priority levels with turns booked on the bucket a
	// limit with priorities shares, when two or more have some
	// (docs/priorities.md; cmd/sluice/priorities.go).
	Levels []levelView `json:"levels,omitempty"`
	// Quota is a calendar quota's used and reset (docs/quotas.md); Parked
	// how many of the type's jobs are parked until its reset, the last due
	// at ParkedUntil (RFC 3339, in the quota's zone).
	Quota       *quotaView `json:"quota,omitempty"`
	Parked      int        `json:"parked,omitempty"`
	ParkedUntil string     `json:"parked_until,omitempty"`
	// InFlight is an automatic in-flight bound (in-flight=auto) as the
	// fleet keeps it; absent without one, or with a bound per key.
	InFlight *flightView `json:"in_flight,omitempty"`

	// Of the type's first row only: every bucket its jobs take from, the
	// one that binds now (its Name; "" when none holds the type back) and
	// why, in one sentence ("global binds: announced by the upstream 40/s
	// at 14:02; 39.8 grants/s"), and its last hour.
	Buckets []bucketView `json:"buckets,omitempty"`
	Binding string       `json:"binding,omitempty"`
	Why     string       `json:"why,omitempty"`
	History *historyView `json:"history,omitempty"`
}

// flightView is an automatic in-flight bound (docs/adaptive.md).
type flightView struct {
	Bound      int     `json:"bound"` // the slots Hold grants now
	Limit      float64 `json:"limit"` // the learned limit
	Held       int     `json:"held"`
	Floor      int     `json:"floor"`
	Ceiling    int     `json:"ceiling"`
	BaselineMS float64 `json:"baseline_ms"`
	RecentMS   float64 `json:"recent_ms"`
	Why        string  `json:"why"` // cold, slow-start, gradient, overload, probe
}

// tenantView is one key of a fair limit's global bucket.
type tenantView struct {
	Key string `json:"key"`
	// Weight is the key's weight in a fair limit's shares; 0 for a key of a
	// limit without fair shares, of which only the longest wait is known
	// (the keys whose jobs waited over the last minutes).
	Weight  int     `json:"weight"`
	Share   float64 `json:"share"`   // of the global rate now, 0 to 1
	AheadS  float64 `json:"ahead_s"` // how far ahead it booked, on its own clock
	Waiting int     `json:"waiting"` // turns held by its jobs sent away over its share
	// Priority is the level of the key's jobs this row counts (1 to 5):
	// a key with jobs of two priorities has a row for each.
	Priority int `json:"priority,omitempty"`
	// LongestWaitS is the longest a job of the key waited from its
	// enqueue to its run over the last minutes, as the workers recorded it.
	LongestWaitS float64 `json:"longest_wait_s,omitempty"`
}

// maxTenants bounds the tenants limits lists per fair limit.
const maxTenants = 10

// limits gathers every limit the fleet uses: the runtime ones and those the
// workers' heartbeats report.
func (f *fleet) limits(ctx context.Context) ([]limitView, []control.Heartbeat, error) {
	now := time.Now()
	runtime, bad, err := f.ctl.Limits(ctx)
	if err != nil {
		return nil, nil, err
	}
	hbs, err := f.ctl.Workers(ctx)
	if err != nil {
		return nil, nil, err
	}
	byType := make(map[string]*limitView)
	view := func(typ string) *limitView {
		if v := byType[typ]; v != nil {
			return v
		}
		v := &limitView{Type: typ}
		byType[typ] = v
		return v
	}
	for typ, e := range runtime {
		v := view(typ)
		v.Spec, v.Specs, v.Source, v.SetBy, v.SetAt = e.Spec, e.Specs, "runtime", e.By, e.At
	}
	for typ, b := range bad {
		v := view(typ)
		v.Spec, v.Source, v.SetBy, v.Malformed = cli.Clip(b.Entry.Spec), "runtime", b.Entry.By, b.Err.Error()
		v.Policy = "malformed"
	}
	for _, h := range hbs {
		for _, l := range h.Limits {
			v := view(l.Type)
			v.Grants += l.Grants
			v.Waiting += l.Waiting
			for p, n := range l.WaitingByPriority {
				if v.WaitingByPriority == nil {
					v.WaitingByPriority = make(map[string]int64)
				}
				v.WaitingByPriority[p] += n
			}
			for _, q := range h.Queues {
				if !slices.Contains(v.Queues, q) {
					v.Queues = append(v.Queues, q)
				}
			}
			switch {
			case v.Malformed != "":
				v.Workers++ // it applies its own limit: the runtime one is not applied
			case v.Spec == "":
				v.Spec, v.Specs, v.Source = l.Spec, l.Specs, l.Source
				v.Workers++
			case v.Spec == l.Spec:
				v.Workers++
			default:
				v.Conflict = true
			}
		}
	}
	depth := make(map[string]*queueView)
	for _, v := range byType {
		for _, q := range v.Queues {
			if _, done := depth[q]; done {
				continue
			}
			depth[q] = nil
			if qs, _ := f.queues([]string{q}); len(qs) == 1 {
				depth[q] = &qs[0]
			}
		}
	}
	out := make([]limitView, 0, len(byType))
	for _, v := range byType {
		if len(v.Queues) > 0 {
			n := 0
			for _, q := range v.Queues {
				d := depth[q]
				if d == nil {
					continue
				}
				n += d.Pending + d.Scheduled + d.Retry
				for p, k := range d.ByPriority {
					if v.QueuedByPriority == nil {
						v.QueuedByPriority = make(map[string]int)
					}
					v.QueuedByPriority[p] += k
				}
			}
			v.Queued = &n
		}
		sp, err := control.ParseSpecs(v.Spec, v.Specs)
		if err != nil || v.Malformed != "" {
			out = append(out, *v)
			continue
		}
		all, flags := sp.All(), sp.Flags()
		v.Keyed = sp.KeyTemplate != ""
		// The bucket the upstream's answers set: the type's own, or with a
		// key template its global one (one per key with adapt=key: none).
		var ad *adaptReading
		if bucket, a, ok := workers.UpstreamAdaptive(sp.Policy); ok {
			if _, st, err := f.lim.AdaptiveLimit(ctx, bucket, a); err == nil {
				v.Effective, v.EffectiveWhy = perSecond(throttle.Limit{Rate: st.Rate, Period: a.Ceiling.Period, Burst: a.Ceiling.Burst}), st.Reason
				ad = &adaptReading{key: bucket, st: st, perS: min(v.Effective, perSecond(a.Ceiling))}
			}
		}
		if key, c := workers.InFlightOf(sp.Policy); key != "" && c.Auto {
			if st, err := f.lim.InFlight(ctx, key, c); err == nil {
				ceiling := c.Max
				if ceiling == 0 {
					ceiling = 1000
				}
				v.InFlight = &flightView{Bound: st.Bound, Limit: st.Rate, Held: st.Held, Floor: max(c.Floor, 1), Ceiling: ceiling,
					BaselineMS: float64(st.Baseline) / 1e6, RecentMS: float64(st.Recent) / 1e6, Why: st.Reason}
			}
		}
		if sp.Fair && sp.Global != nil {
			ts, n, err := f.lim.Shares(ctx, workers.GlobalKey(sp.Policy), sp.Global, maxTenants)
			if err == nil {
				v.TenantCount = n
				for _, t := range ts {
					v.Tenants = append(v.Tenants, tenantView{Key: t.Tenant, Weight: t.Weight, Share: t.Share, AheadS: t.Ahead.Seconds(), Waiting: t.Waiting, Priority: t.Priority})
				}
			}
		}
		f.readLevels(ctx, v, sp, all)
		// One row per limit: every job of the type takes from each, so the
		// type's grants, waiting jobs and workers are each one's.
		rows := make([]limitView, 0, len(all))
		for i, l := range all {
			row := *v
			if i > 0 {
				row = limitView{Type: v.Type, Source: v.Source, SetBy: v.SetBy, SetAt: v.SetAt, Keyed: v.Keyed, Grants: v.Grants,
					Waiting: v.Waiting, WaitingByPriority: v.WaitingByPriority, Queued: v.Queued, Queues: v.Queues, QueuedByPriority: v.QueuedByPriority,
					Workers: v.Workers, Conflict: v.Conflict}
			}
			row.Limit, row.Policy, row.RatePerS = l.Name, limitspec.PolicyName(l.Limit), perSecond(l.Limit)
			if len(all) > 1 {
				row.Spec, row.Specs = flags[i], flags
			}
			if !v.Keyed {
				if st, err := f.lim.Peek(ctx, workers.BucketKey(sp.Policy, sp.Name, l.Name), l.Limit); err == nil {
					tokens := st.Remaining
					row.Tokens = &tokens
					row.Cooldown = st.Cooldown.Seconds()
				}
			}
			if w, ok := calendarOf(l.Limit); ok {
				row.Quota = quotaOf(w, row.Tokens, now)
				row.Parked, row.ParkedUntil = f.parkedOf(ctx, v.Type, w.Zone)
			}
			rows = append(rows, row)
		}
		if len(rows) > 0 {
			f.fillBinding(ctx, sp, rows, ad, now)
			f.fillHistory(ctx, &rows[0], now)
		}
		out = append(out, rows...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out, hbs, nil
}

// limiting counts the live workers whose heartbeats report a limit for typ;
// -1 if they cannot be read.
func (f *fleet) limiting(ctx context.Context, typ string) int {
	hbs, err := f.ctl.Workers(ctx)
	if err != nil {
		return -1
	}
	n := 0
	for _, h := range hbs {
		if slices.ContainsFunc(h.Limits, func(l control.LimitState) bool { return l.Type == typ }) {
			n++
		}
	}
	return n
}

// policyOf finds the policy of bucket key: the limit of type typ (key itself
// when typ is empty) named limit, or its first limit (its own bucket) when
// limit is empty, runtime first, else as the workers apply it; and the
// bucket the workers keep key in under it (workers.BucketKey).
func (f *fleet) policyOf(ctx context.Context, key, typ, limit string) (throttle.Policy, string, error) {
	if typ == "" {
		typ = key
	}
	views, _, err := f.limits(ctx)
	if err != nil {
		return nil, "", err
	}
	for _, v := range views {
		if v.Type != typ {
			continue
		}
		if v.Malformed != "" {
			return nil, "", cli.Usagef("the runtime limit of %q is malformed: %s (sluice unset %s removes it)", typ, v.Malformed, typ)
		}
		sp, err := control.ParseSpecs(v.Spec, v.Specs)
		if err != nil {
			return nil, "", err
		}
		if sp.KeyTemplate != "" && key == typ {
			return nil, "", cli.Usagef("%s has a key template (%s): name a bucket it makes, e.g. sluice inspect tenant:acme --type %s", typ, sp.KeyTemplate, typ)
		}
		all := sp.All()
		if limit == "" {
			// The type's own bucket, where cooldowns go.
			return all[0].Limit, workers.BucketKey(sp.Policy, key, all[0].Name), nil
		}
		names := make([]string, 0, len(all))
		for _, l := range all {
			if l.Name == limit {
				return l.Limit, workers.BucketKey(sp.Policy, key, l.Name), nil
			}
			if l.Name != "" {
				names = append(names, l.Name)
			}
		}
		if len(names) == 0 {
			return nil, "", cli.Usagef("%s has no named limits: leave --limit out", typ)
		}
		return nil, "", cli.Usagef("%s has no limit named %q: it has %s", typ, limit, strings.Join(names, ", "))
	}
	return nil, "", cli.Usagef("no limit for type %q in the fleet (no runtime limit, no worker reports one); see sluice limits", typ)
}

// perSecond is a policy's rate in grants per second.
func perSecond(p throttle.Policy) float64 {
	rate, period := limitspec.RateOf(p)
	if period <= 0 {
		return 0
	}
	return rate / period.Seconds()
}

// current is the first row of typ's limit as the fleet applies it now, and
// its spec; nil, nil if the fleet has none.
func (f *fleet) current(ctx context.Context, typ string) (*limitView, *limitspec.Spec, error) {
	views, _, err := f.limits(ctx)
	if err != nil {
		return nil, nil, err
	}
	for i, v := range views {
		if v.Type != typ {
			continue
		}
		if sp, err := control.ParseSpecs(v.Spec, v.Specs); err == nil && v.Malformed == "" {
			return &views[i], &sp, nil
		}
		return &views[i], nil, nil
	}
	return nil, nil, nil
}

// change makes a runtime change to the limit of typ whole, or changes
// nothing and says so: it checks that this user may change the runtime
// limits, restarts the bucket of the limit the fleet applies to typ now (see
// restart), then commits (the runtime limit stored and the workers told, in
// one script). The bucket and the runtime limits may live in different
// Cluster slots, so no one script holds both: a failure after the bucket was
// restarted says what was done. Unless the error says otherwise, nothing
// was changed.
func (f *fleet) change(ctx context.Context, typ string, commit func() error) error {
	_, old, err := f.current(ctx, typ)
	if err != nil {
		return fmt.Errorf("nothing was changed: %w", err)
	}
	if err := f.ctl.Check(ctx); err != nil {
		return fmt.Errorf("nothing was changed: %w", err)
	}
	restarted, err := f.restart(ctx, old)
	if err != nil {
		return err
	}
	if err := commit(); err != nil {
		if restarted != "" {
			return fmt.Errorf("not applied: %w; but the bucket %s had been reset (full again) for it", err, restarted)
		}
		return fmt.Errorf("nothing was changed: %w", err)
	}
	return nil
}

// restart empties the buckets of the limit old, when a runtime change
// replaces it, so that the new limit starts from full buckets instead of
// behind the turns booked under the old one (the workers void those: see
// workers.Pool.SetPolicy): one per limit of the type. A cooldown in place
// is kept. A limit with a key template has buckets per key, which are left
// as they are, and its global bucket, which is emptied: the turns of every
// key's jobs sent back are booked there. It returns the buckets it emptied,
// if any; its error says what it had done.
func (f *fleet) restart(ctx context.Context, old *limitspec.Spec) (string, error) {
	var done []string
	for _, b := range restartBuckets(old) {
		left, err := f.lim.CooldownLeft(ctx, b.key)
		if err != nil {
			return "", f.partly(done, fmt.Errorf("reading the cooldown of bucket %s: %w", b.key, err))
		}
		if err := f.lim.Reset(ctx, b.key, b.limit); err != nil {
			return "", f.partly(done, fmt.Errorf("resetting bucket %s: %w", b.key, err))
		}
		done = append(done, b.key)
		if left > 0 {
			if _, err := f.lim.Cooldown(ctx, b.key, b.limit, left); err != nil {
				return "", fmt.Errorf("not applied: bucket %s was reset (full again) but its cooldown could not be put back "+
					"(sluice cooldown %s %v puts it back): %w", b.key, old.Name, left.Round(time.Second), err)
			}
		}
	}
	return strings.Join(done, ", "), nil
}

// restartBucket is a bucket restart empties.
type restartBucket struct {
	key   string
	limit throttle.Policy
}

// restartBuckets are the buckets restart empties when a change replaces
// the limit old (nil: none): one per limit, or with a key template its
// global bucket only.
func restartBuckets(old *limitspec.Spec) []restartBucket {
	if old == nil || (old.KeyTemplate != "" && old.Global == nil) {
		return nil
	}
	if old.KeyTemplate != "" {
		return []restartBucket{{workers.GlobalKey(old.Policy), old.Global}}
	}
	var buckets []restartBucket
	for _, l := range old.All() {
		buckets = append(buckets, restartBucket{workers.BucketKey(old.Policy, old.Name, l.Name), l.Limit})
	}
	return buckets
}

// partly says what restart had done when err stopped it: nothing, or
// reset the buckets done.
func (f *fleet) partly(done []string, err error) error {
	if len(done) == 0 {
		return fmt.Errorf("nothing was changed: %w", err)
	}
	return fmt.Errorf("not applied: %w; but bucket %s had been reset (full again) for it", err, strings.Join(done, ", "))
}
