package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/limitspec"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// This file says what holds a type back: every bucket its jobs take from
// (bucketView), the cause of each one's effective rate in words, and which
// one binds now (bind), in one sentence for the page, sluice limits and
// sluice inspect TYPE. Times in the causes are written in UTC ("14:02 UTC"):
// the page and the terminal may be in any zone, and the workers' logs are
// in UTC.

// adaptReading is what the store says of a type's adaptive bucket: its key
// and state, and its rate per second now (at most the ceiling's).
type adaptReading struct {
	key  string
	st   throttle.AdaptState
	perS float64
}

// bindDemand is what a type asks of its buckets now: grants per second
// over the last minute, jobs waiting in workers, jobs queued.
type bindDemand struct {
	Grants  float64
	Waiting int64
	Queued  int
}

// demandOf is the demand of v, a type's first row.
func demandOf(v *limitView) bindDemand {
	d := bindDemand{Grants: v.Grants, Waiting: v.Waiting}
	if v.Queued != nil {
		d.Queued = *v.Queued
	}
	return d
}

// fillBinding sets the Buckets, Binding and Why of rows[0], the first row
// of the type of spec sp (rows are the type's rows, one per limit, with
// their tokens, cooldowns and quotas read), reading the global bucket; ad
// is the type's adaptive bucket, if it has one.
func (f *fleet) fillBinding(ctx context.Context, sp limitspec.Spec, rows []limitView, ad *adaptReading, now time.Time) {
	v := &rows[0]
	src := sourceCause(v.Source, v.SetBy, v.SetAt)
	all := sp.All()
	var bs []bucketView
	if sp.KeyTemplate != "" {
		for _, l := range all {
			b := bucketView{Name: "per key " + sp.KeyTemplate, Kind: "key", RatePerS: perSecond(l.Limit), Cause: src, CapacityPerS: -1}
			if l.Name != "" {
				b.Name += " (" + l.Name + ")"
			}
			b.EffectivePerS = b.RatePerS
			if w, ok := calendarOf(l.Limit); ok { // a quota per key: spent or not, key by key
				b.Cause = quotaOf(w, nil, now).Text
			} else if v.TenantCount > 0 {
				b.CapacityPerS = b.RatePerS * float64(v.TenantCount)
			}
			bs = append(bs, b)
		}
		if sp.Global != nil {
			key := workers.GlobalKey(sp.Policy)
			b := bucketView{Name: "global", Kind: "global", Key: key, RatePerS: perSecond(sp.Global), Cause: src}
			if st, err := f.lim.Peek(ctx, key, sp.Global); err == nil {
				tokens := st.Remaining
				b.Tokens, b.Cooldown = &tokens, st.Cooldown.Seconds()
			}
			rateBucket(&b, ad, now)
			bs = append(bs, b)
		}
	} else {
		for i, l := range all {
			row := rows[min(i, len(rows)-1)]
			b := bucketView{Kind: "own", Name: "own", Key: workers.BucketKey(sp.Policy, sp.Name, l.Name), RatePerS: perSecond(l.Limit),
				Cause: src, Tokens: row.Tokens, Cooldown: row.Cooldown}
			if l.Name != "" {
				b.Kind, b.Name = "named", "limit "+l.Name
			}
			if _, ok := calendarOf(l.Limit); ok && row.Quota != nil {
				b.Kind = "quota"
				if l.Name == "" {
					b.Name = "quota"
				}
				quotaBucket(&b, row.Quota)
			} else {
				rateBucket(&b, ad, now)
			}
			bs = append(bs, b)
		}
	}
	if key, c := workers.InFlightOf(sp.Policy); key != "" {
		b := bucketView{Name: "in flight", Kind: "in_flight", Key: key, CapacityPerS: -1}
		switch fl := v.InFlight; {
		case c.Auto && fl != nil:
			free := max(fl.Bound-fl.Held, 0)
			b.RatePerS, b.EffectivePerS, b.Tokens = float64(fl.Ceiling), float64(fl.Bound), &free
			b.Cause = fmt.Sprintf("%d of %d slots held (auto, %s)", fl.Held, fl.Bound, fl.Why)
		case c.Auto:
			b.Cause = "auto: the store did not answer"
		default:
			b.RatePerS, b.EffectivePerS = float64(c.Max), float64(c.Max)
			b.Cause = fmt.Sprintf("at most %d in flight (fixed; %s)", c.Max, src)
		}
		bs = append(bs, b)
	}
	v.Buckets = bs
	v.Binding, v.Why = bind(v.Buckets, demandOf(v))
}

// rateBucket sets b's effective rate, cause and capacity: a rate bucket's
// configured rate (its cause as set), or the rate the upstream's answers
// set when b is the adaptive bucket ad; 0 while it cools down.
func rateBucket(b *bucketView, ad *adaptReading, now time.Time) {
	b.EffectivePerS = b.RatePerS
	if ad != nil && ad.key == b.Key {
		b.EffectivePerS = min(ad.perS, b.RatePerS)
		b.Cause = adaptCause(ad.st, b.EffectivePerS, b.Cause, now)
	}
	if b.Cooldown > 0 {
		b.EffectivePerS = 0
		b.Cause = coolingCause(b.Cooldown)
	}
	b.CapacityPerS = b.EffectivePerS
}

// quotaBucket sets the effective rate, cause and capacity of b, a calendar
// quota's bucket of state q: 0 when spent (or cooling down), else its rate,
// which does not bound the type's rate (capacity -1).
func quotaBucket(b *bucketView, q *quotaView) {
	spent := q.Used != nil && *q.Used >= q.Max
	b.EffectivePerS, b.CapacityPerS, b.Cause = b.RatePerS, -1, q.Text
	switch {
	case b.Cooldown > 0:
		b.EffectivePerS, b.CapacityPerS, b.Cause = 0, 0, coolingCause(b.Cooldown)
	case spent:
		b.EffectivePerS, b.CapacityPerS, b.Cause = 0, 0, "spent: "+q.Text
	}
}

// coolingCause says a bucket cools down for s seconds more.
func coolingCause(s float64) string {
	return fmt.Sprintf("cooling down %ds after a 429 or 503 (or sluice cooldown)", int(math.Ceil(s)))
}

// sourceCause says where a configured limit comes from: a runtime limit
// (who set it, when), the workers' --limit flag, their limits file.
func sourceCause(source, by string, at time.Time) string {
	switch {
	case source == "runtime":
		s := "runtime limit"
		if by != "" {
			s += " set by " + by
		}
		if !at.IsZero() {
			s += " at " + clock(at)
		}
		return s
	case strings.HasPrefix(source, "flag"):
		return "the workers' --limit flag"
	case strings.HasPrefix(source, "file"), strings.HasPrefix(source, "limits file"):
		return "the workers' limits file"
	case source == "":
		return "configured"
	}
	return "the workers' " + source
}

// adaptCause says why an adaptive bucket's rate is perS now, from its
// state st at now; configured is the cause of its ceiling.
func adaptCause(st throttle.AdaptState, perS float64, configured string, now time.Time) string {
	at := clock(now.Add(-st.Age))
	switch st.Reason {
	case "header":
		return fmt.Sprintf("announced by the upstream %s at %s", rateText(perS), at)
	case "429":
		return "lowered after 429s at " + at
	case "recovery":
		return "recovering after 429s, last raised at " + at
	case "cold":
		return "cold start: waiting for the upstream's first answer"
	}
	return configured
}

// clock writes t as "14:02 UTC".
func clock(t time.Time) string { return t.UTC().Format("15:04") + " UTC" }

// rateText writes a rate per second as people write it: "40/s", "2.5/s",
// "30/m", "12/h".
func rateText(perS float64) string {
	n, unit := perS, "/s"
	if perS > 0 && perS < 1 {
		n, unit = perS*60, "/m"
		if n < 1 {
			n, unit = perS*3600, "/h"
		}
	}
	return strconv.FormatFloat(math.Round(n*10)/10, 'f', -1, 64) + unit
}

// bindShare is the part of a bucket's capacity a type's grants must reach
// for the bucket to count as holding it back when nothing waits or is
// queued.
const bindShare = 0.9

// bind says which of a type's buckets bs holds it back under demand d, and
// why, in one sentence; it marks that bucket Binds. A bucket that lets
// nothing through (cooling down, a quota spent) binds first; then an
// in-flight bound whose slots are all held (Tokens 0) while jobs wait; then
// the bucket of the lowest capacity (≥ 0) if the type has demand: jobs
// waiting or queued, or grants at bindShare of that capacity. None binds
// for an idle type, or one under every limit.
func bind(bs []bucketView, d bindDemand) (binding, why string) {
	for i := range bs {
		bs[i].Binds = false
	}
	lowest := -1
	for i, b := range bs {
		if b.CapacityPerS >= 0 && (lowest < 0 || b.CapacityPerS < bs[lowest].CapacityPerS) {
			lowest = i
		}
	}
	full := -1
	for i, b := range bs {
		if b.Kind == "in_flight" && b.Tokens != nil && *b.Tokens <= 0 && d.Waiting > 0 {
			full = i
		}
	}
	waiting := d.Waiting > 0 || d.Queued > 0
	pick := -1
	switch {
	case lowest >= 0 && bs[lowest].CapacityPerS == 0 && (waiting || d.Grants > 0):
		pick = lowest
	case full >= 0:
		pick = full
	case lowest >= 0 && (waiting || d.Grants > 0 && d.Grants >= bindShare*bs[lowest].CapacityPerS):
		pick = lowest
	}
	load := demandText(d)
	unknown := false
	for _, b := range bs {
		unknown = unknown || b.Kind == "key" && b.CapacityPerS < 0
	}
	switch {
	case pick >= 0:
		bs[pick].Binds = true
		return bs[pick].Name, fmt.Sprintf("%s binds: %s; %s", bs[pick].Name, bs[pick].Cause, load)
	case !waiting && d.Grants == 0:
		return "", "idle"
	case unknown:
		return "", fmt.Sprintf("no bucket is known to bind: %s (a per-key limit's capacity depends on the keys with work)", load)
	case !waiting:
		return "", fmt.Sprintf("nothing binds: %s, under every limit", load)
	}
	return "", fmt.Sprintf("no bucket is known to bind: %s", load)
}

// demandText writes d: "39.8 grants/s, 3 waiting, 120 queued".
func demandText(d bindDemand) string {
	s := fmt.Sprintf("%.1f grants/s", d.Grants)
	if d.Waiting > 0 {
		s += fmt.Sprintf(", %s waiting", thousands(int(d.Waiting)))
	}
	if d.Queued > 0 {
		s += fmt.Sprintf(", %s queued", thousands(d.Queued))
	}
	return s
}
