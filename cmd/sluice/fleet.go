package main

import (
	"context"
	"sort"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/limitspec"
	"github.com/sluicehq/sluice/throttle"
)

// fleet is the limiter's Redis as the sluice command sees it.
type fleet struct {
	rdb redis.UniversalClient
	ctl *control.Control
	lim *throttle.Limiter
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
	return &fleet{rdb: rdb, ctl: control.New(rdb, opts.keyPrefix), lim: lim}, nil
}

func (f *fleet) close() { f.rdb.Close() }

// limitView is one limit as the fleet applies it.
type limitView struct {
	Type     string  `json:"type"`
	Policy   string  `json:"policy"`
	Spec     string  `json:"spec"`
	Source   string  `json:"source"` // runtime, or what the workers say (flag, file)
	SetBy    string  `json:"set_by,omitempty"`
	Keyed    bool    `json:"keyed"`                // a bucket per key: no one bucket to show
	Tokens   *int    `json:"tokens,omitempty"`     // left in the type's bucket
	Cooldown float64 `json:"cooldown_s,omitempty"` // left on it
	Grants   float64 `json:"grants_per_s"`         // over the last minute, all workers
	Workers  int     `json:"workers"`              // applying this spec
	Conflict bool    `json:"conflict,omitempty"`   // workers apply different specs
}

// limits gathers every limit the fleet uses: the runtime ones and those the
// workers' heartbeats report.
func (f *fleet) limits(ctx context.Context) ([]limitView, []control.Heartbeat, error) {
	runtime, _, err := f.ctl.Limits(ctx)
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
		v.Spec, v.Source, v.SetBy = e.Spec, "runtime", e.By
	}
	for _, h := range hbs {
		for _, l := range h.Limits {
			v := view(l.Type)
			v.Grants += l.Grants
			switch {
			case v.Spec == "":
				v.Spec, v.Source = l.Spec, l.Source
				v.Workers++
			case v.Spec == l.Spec:
				v.Workers++
			default:
				v.Conflict = true
			}
		}
	}
	out := make([]limitView, 0, len(byType))
	for _, v := range byType {
		sp, err := limitspec.Parse(v.Spec)
		if err == nil {
			v.Policy = policyName(sp.Limit)
			v.Keyed = sp.Key != ""
			if !v.Keyed {
				if st, err := f.lim.Peek(ctx, sp.Type, sp.Limit); err == nil {
					tokens := st.Remaining
					v.Tokens = &tokens
					v.Cooldown = st.Cooldown.Seconds()
				}
			}
		}
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out, hbs, nil
}

// policyOf finds the policy of bucket key: the limit of type typ (key itself
// when typ is empty), runtime first, else as the workers apply it.
func (f *fleet) policyOf(ctx context.Context, key, typ string) (throttle.Policy, error) {
	if typ == "" {
		typ = key
	}
	views, _, err := f.limits(ctx)
	if err != nil {
		return nil, err
	}
	for _, v := range views {
		if v.Type != typ {
			continue
		}
		sp, err := limitspec.Parse(v.Spec)
		if err != nil {
			return nil, err
		}
		if sp.Key != "" && key == typ {
			return nil, cli.Usagef("%s has a key template (%s): name a bucket it makes, e.g. sluice inspect tenant:acme --type %s", typ, sp.Key, typ)
		}
		return sp.Limit, nil
	}
	return nil, cli.Usagef("no limit for type %q in the fleet (no runtime limit, no worker reports one); see sluice limits", typ)
}

// policyName is a policy's name in the --limit grammar.
func policyName(p throttle.Policy) string {
	switch p.(type) {
	case throttle.FixedWindow:
		return "fixed-window"
	case throttle.SlidingLog:
		return "sliding-log"
	case throttle.SlidingWindow:
		return "sliding-window"
	case throttle.LeakyBucket:
		return "leaky-bucket"
	}
	return "token-bucket"
}
