package limitspec

import (
	"time"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// flat is a Spec written out flat, for tables: its Key is the template, and
// a Spec compares as its flat form, since a KeyFunc never equals another.
type flat struct {
	Type     string
	Limit    throttle.Policy
	Key      string
	MaxWait  time.Duration
	Cost     int
	Global   *throttle.Limit
	InFlight int
	Adapt    bool
	Floor    float64
	Fair     bool
	Weights  map[string]int
	Named    []workers.NamedLimit // without their CostFrom
	Costs    map[string]string    // the cost templates
	Settles  map[string]string    // the settle templates
}

// spec is f as a Spec, without the Key its template makes.
func (f flat) spec() Spec {
	sp := Spec{Policy: workers.Policy{
		Name: f.Type, Limit: f.Limit, MaxWait: f.MaxWait, Cost: f.Cost, InFlight: f.InFlight,
		Adapt: f.Adapt, AdaptFloor: f.Floor, Fair: f.Fair, Weights: f.Weights, Priorities: f.Fair, // priorities follow fair shares by default
	}, KeyTemplate: f.Key, CostTemplates: f.Costs, SettleTemplates: f.Settles}
	sp.Limits = f.Named
	if f.Global != nil {
		sp.Global = *f.Global
	}
	return sp
}

// flatOf is sp written out flat.
func flatOf(sp Spec) flat {
	f := flat{
		Type: sp.Name, Limit: sp.Limit, Key: sp.KeyTemplate, MaxWait: sp.MaxWait, Cost: sp.Cost, InFlight: sp.InFlight,
		Adapt: sp.Adapt, Floor: sp.AdaptFloor, Fair: sp.Fair, Weights: sp.Weights,
	}
	if g, ok := sp.Global.(throttle.Limit); ok {
		f.Global = &g
	}
	for _, l := range sp.Limits {
		l.CostFrom, l.SettleFrom = nil, nil
		f.Named = append(f.Named, l)
	}
	if len(sp.CostTemplates) > 0 {
		f.Costs = sp.CostTemplates
	}
	if len(sp.SettleTemplates) > 0 {
		f.Settles = sp.SettleTemplates
	}
	return f
}

// flatsOf is each of specs written out flat.
func flatsOf(specs []Spec) []flat {
	out := make([]flat, len(specs))
	for i, sp := range specs {
		out[i] = flatOf(sp)
	}
	return out
}
