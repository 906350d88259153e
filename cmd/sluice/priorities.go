package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/sluicehq/sluice/internal/limitspec"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// levelView is one priority level of a limit with priorities, as its shared
// bucket knows it (docs/priorities.md): the level's part of the rate now,
// how far ahead it booked, and its jobs sent back to their places.
type levelView struct {
	Priority int     `json:"priority"`
	Share    float64 `json:"share"`   // of the bucket's rate now, 0 to 1
	AheadS   float64 `json:"ahead_s"` // how far ahead its furthest key booked, on its own clock
	Waiting  int     `json:"waiting"` // turns held by its jobs sent away over its share
}

// maxLevelPairs bounds the (level, key) pairs read to sum each level.
const maxLevelPairs = 500

// sharedBucket is the bucket sp's jobs share among levels (and keys, under
// fair shares), and its policy: Global if set, else the type's own bucket;
// ok is false without priorities, or with a bucket per key and no Global
// (one shared bucket per key: too many to read).
func sharedBucket(sp limitspec.Spec, all []workers.NamedLimit) (key string, pol throttle.Policy, ok bool) {
	switch {
	case !sp.Priorities:
		return "", nil, false
	case sp.Global != nil:
		return workers.GlobalKey(sp.Policy), sp.Global, true
	case sp.KeyTemplate != "":
		return "", nil, false
	}
	return workers.BucketKey(sp.Policy, sp.Name, all[0].Name), all[0].Limit, true
}

// readLevels sets v.Levels from the shared bucket of sp, if it has one and
// two levels or more have turns booked on it (one level has the whole
// bucket: there is nothing to split, and the tenants name its priority).
func (f *fleet) readLevels(ctx context.Context, v *limitView, sp limitspec.Spec, all []workers.NamedLimit) {
	key, pol, ok := sharedBucket(sp, all)
	if !ok {
		return
	}
	ts, _, err := f.lim.Shares(ctx, key, pol, maxLevelPairs)
	if err != nil {
		return
	}
	if ls := levelsOf(ts); len(ls) > 1 {
		v.Levels = ls
	}
}

// levelsOf sums the pairs of ts by level, highest priority first.
func levelsOf(ts []throttle.TenantShare) []levelView {
	by := map[int]*levelView{}
	for _, t := range ts {
		l := by[t.Priority]
		if l == nil {
			l = &levelView{Priority: t.Priority}
			by[t.Priority] = l
		}
		l.Share += t.Share
		l.AheadS = max(l.AheadS, t.Ahead.Seconds())
		l.Waiting += t.Waiting
	}
	out := make([]levelView, 0, len(by))
	for _, l := range by {
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Priority < out[j].Priority })
	return out
}

// writeLevels prints the levels of the views that have some.
func writeLevels(out io.Writer, views []limitView) error {
	for _, v := range views {
		if len(v.Levels) == 0 { // a type's named limits have them on its first row only
			continue
		}
		fmt.Fprintf(out, "\n%s: priorities with turns booked now\n", v.Type)
		tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  PRIORITY\tSHARE\tBOOKED AHEAD\tWAITING")
		for _, l := range v.Levels {
			fmt.Fprintf(tw, "  %d\t%.0f%%\t%s\t%d\n", l.Priority, 100*l.Share, seconds(l.AheadS), l.Waiting)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
