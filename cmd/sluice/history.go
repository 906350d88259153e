package main

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/history"
)

// tenantWaitsOver is the span a tenant's longest wait is taken over.
const tenantWaitsOver = 5 * time.Minute

// fillHistory sets the History of v, a type's first row, and the
// LongestWaitS of its tenants, from the rings the workers keep in the
// limiter's Redis (internal/history): the last hour, and each tenant's
// longest wait over the last tenantWaitsOver. A type no worker has written
// a ring for has no History; one that cannot be read is left without.
func (f *fleet) fillHistory(ctx context.Context, v *limitView, now time.Time) {
	step, pts, err := history.Read(ctx, f.rdb, f.prefix, v.Type, now)
	if err == nil && step > 0 {
		if pts == nil {
			pts = []history.Point{}
		}
		v.History = &historyView{StepS: step.Seconds(), Points: pts}
	}
	if len(v.Tenants) == 0 {
		return
	}
	waits, err := history.ReadWaits(ctx, f.rdb, f.prefix, v.Type, now, tenantWaitsOver)
	if err != nil {
		return
	}
	for i := range v.Tenants {
		if d, ok := waits[v.Tenants[i].Key]; ok {
			v.Tenants[i].LongestWaitS = d.Seconds()
		}
	}
}
