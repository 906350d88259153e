package main

import (
	"context"
	"sort"
	"time"

	"github.com/sluicehq/sluice/internal/history"
)

// tenantWaitsOver is the span a tenant's longest wait is taken over.
const tenantWaitsOver = 5 * time.Minute

// fillHistory sets the History of v, a type's first row, and the
// LongestWaitS of its tenants, from the rings the workers keep in the
// limiter's Redis (internal/history): the last hour, and each tenant's
// longest wait over the last tenantWaitsOver (for a key template without
// fair shares, the keys that waited longest). A type no worker has written
// a ring for has no History; one that cannot be read is left without.
func (f *fleet) fillHistory(ctx context.Context, v *limitView, now time.Time) {
	step, pts, err := history.Read(ctx, f.rdb, f.prefix, v.Type, now)
	if err == nil && step > 0 {
		if pts == nil {
			pts = []history.Point{}
		}
		v.History = &historyView{StepS: step.Seconds(), Points: pts}
	}
	if len(v.Tenants) == 0 && !v.Keyed {
		return
	}
	waits, err := history.ReadWaits(ctx, f.rdb, f.prefix, v.Type, now, tenantWaitsOver)
	if err != nil {
		return
	}
	if len(v.Tenants) == 0 {
		// A key template without fair shares: no bucket knows its keys'
		// shares, but the workers recorded how long each key's jobs waited.
		v.Tenants = waitedKeys(waits, maxTenants)
		return
	}
	for i := range v.Tenants {
		if d, ok := waits[v.Tenants[i].Key]; ok {
			v.Tenants[i].LongestWaitS = d.Seconds()
		}
	}
}

// waitedKeys are the n keys of waits that waited longest, longest first
// (by key on a tie), each with only its longest wait (Weight 0: no share).
func waitedKeys(waits map[string]time.Duration, n int) []tenantView {
	out := make([]tenantView, 0, len(waits))
	for k, d := range waits {
		out = append(out, tenantView{Key: k, LongestWaitS: d.Seconds()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].LongestWaitS != out[j].LongestWaitS {
			return out[i].LongestWaitS > out[j].LongestWaitS
		}
		return out[i].Key < out[j].Key
	})
	return out[:min(n, len(out))]
}
