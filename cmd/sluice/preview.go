package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/limitspec"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/workers"
)

// This file says what an action of the dashboard will do before it is
// taken (POST /api/preview): the facts it reads (previewFacts, from the
// fleet's state now) and the sentence made of them (confirmText).

// previewFacts are what an action's confirmation says.
type previewFacts struct {
	Op   string
	Type string
	// set: the new spec, without its type ("20/s,burst=2"); the live
	// workers that limit the type (-1: their heartbeats cannot be read).
	Spec    string
	Workers int
	// set, unset: the buckets the change empties (restartBuckets); a key
	// template's per-key buckets keep their turns.
	Emptied []string
	PerKey  bool
	// set: the parked jobs a raise of a calendar quota brings back, of all
	// those parked (workers/replan.go: a looser quota, not spent).
	Unpark, Parked int
	// unset: the specs the workers report as their own (flag or file),
	// if any reports one while the runtime limit is set.
	Own []string
	// reset, cooldown: the bucket; reset: the jobs of the type sent back
	// holding a turn (a ticket), at least (TicketsMore: more were not
	// looked at); cooldown: how long, and the jobs waiting in workers.
	Bucket      string
	Tickets     int
	TicketsMore bool
	Duration    time.Duration
	Waiting     int64
}

// confirmText says what the action of x will do, in one sentence.
func confirmText(x previewFacts) string {
	var b strings.Builder
	emptied := func() {
		switch {
		case len(x.Emptied) == 1:
			fmt.Fprintf(&b, "; the bucket %s is emptied (full again)", x.Emptied[0])
		case len(x.Emptied) > 1:
			fmt.Fprintf(&b, "; the buckets %s are emptied (full again)", strings.Join(x.Emptied, ", "))
		}
		if x.PerKey {
			b.WriteString("; each key's bucket keeps the turns booked in it")
		}
	}
	switch x.Op {
	case "set":
		switch {
		case x.Workers == 0:
			fmt.Fprintf(&b, "no live worker limits %s: %s is stored, and a worker applies it once it runs with a limit for the type", x.Type, x.Spec)
		case x.Workers == 1:
			fmt.Fprintf(&b, "the worker that limits %s applies %s within a second", x.Type, x.Spec)
		case x.Workers > 1:
			fmt.Fprintf(&b, "every worker that limits %s (%d) applies %s within a second", x.Type, x.Workers, x.Spec)
		default:
			fmt.Fprintf(&b, "every worker that limits %s applies %s within a second", x.Type, x.Spec)
		}
		emptied()
		switch {
		case x.Unpark > 0 && x.Unpark == x.Parked:
			fmt.Fprintf(&b, "; %s parked jobs come back", thousands(x.Unpark))
		case x.Unpark > 0:
			fmt.Fprintf(&b, "; %s of the %s parked jobs come back", thousands(x.Unpark), thousands(x.Parked))
		}
	case "unset":
		fmt.Fprintf(&b, "the workers' own limits of %s apply again", x.Type)
		if len(x.Own) > 0 {
			fmt.Fprintf(&b, ": %s", strings.Join(x.Own, "; "))
		} else {
			b.WriteString(" (their flags or limits files; their heartbeats show the runtime limit while it is set)")
		}
		emptied()
	case "reset":
		more := ""
		if x.TicketsMore {
			more = "at least "
		}
		fmt.Fprintf(&b, "bucket %s is full again; the turns booked in it are void", x.Bucket)
		if x.Tickets > 0 || x.TicketsMore {
			fmt.Fprintf(&b, " and %s%s jobs sent back holding them come forward (as many at once as the limit runs in 5s)", more, thousands(x.Tickets))
		}
	case "cooldown":
		fmt.Fprintf(&b, "every worker pauses bucket %s for %s: its jobs wait or go back to their queue (%s waiting now)",
			x.Bucket, x.Duration, thousands(int(x.Waiting)))
	}
	return b.String()
}

// preview reads the facts of action req from the fleet, taking and
// changing nothing, and says what it will do; an error for a bad request
// matches cli.ErrUsage, with the message the action would give.
func (f *fleet) preview(ctx context.Context, req actionRequest) (string, error) {
	x := previewFacts{Op: req.Op}
	switch req.Op {
	case "set":
		all, err := limitspec.ParseAll([]string{req.Spec})
		if err != nil {
			return "", cli.Usagef("%w", err)
		}
		if len(all) != 1 {
			return "", cli.Usagef("set takes the limits of one type at a time, not %d", len(all))
		}
		sp := all[0]
		x.Type, x.Workers = sp.Name, f.limiting(ctx, sp.Name)
		x.Spec = strings.TrimPrefix(sp.String(), sp.Name+"=")
		v, old, err := f.current(ctx, sp.Name)
		if err != nil {
			return "", err
		}
		x.Emptied, x.PerKey = emptiedBy(old)
		if x.Parked, x.Unpark, err = f.unparked(ctx, sp, old, v); err != nil {
			return "", err
		}
	case "unset":
		if err := workers.CheckName(req.Type); err != nil {
			return "", cli.Usagef("unset: %w", err)
		}
		runtime, _, err := f.ctl.Limits(ctx)
		if err != nil {
			return "", err
		}
		if _, ok := runtime[req.Type]; !ok {
			return "", cli.Usagef("no runtime limit for type %q", req.Type)
		}
		x.Type = req.Type
		_, old, err := f.current(ctx, req.Type)
		if err != nil {
			return "", err
		}
		x.Emptied, x.PerKey = emptiedBy(old)
		hbs, err := f.ctl.Workers(ctx)
		if err != nil {
			return "", err
		}
		for _, h := range hbs {
			for _, l := range h.Limits {
				if l.Type == req.Type && l.Source != "runtime" && !slices.Contains(x.Own, l.Spec) {
					x.Own = append(x.Own, l.Spec)
				}
			}
		}
	case "reset", "cooldown":
		args := []string{req.Key}
		if req.Op == "cooldown" {
			args = append(args, req.Duration)
			d, err := cooldownFor(req.Key, req.Duration)
			if err != nil {
				return "", err
			}
			x.Duration = d
		}
		opts := options{typ: req.Type}
		if err := checkBucket(opts, args); err != nil {
			return "", err
		}
		if _, _, err := f.policyOf(ctx, req.Key, req.Type, ""); err != nil {
			return "", err
		}
		x.Type, x.Bucket = cmp.Or(req.Type, req.Key), req.Key
		v, _, err := f.current(ctx, x.Type)
		if err != nil {
			return "", err
		}
		if v != nil {
			x.Waiting = v.Waiting
			if req.Op == "reset" {
				x.Tickets, x.TicketsMore = f.ticketsOf(v)
			}
		}
	default:
		return "", cli.Usagef("unknown op %q: want set, unset, reset or cooldown", req.Op)
	}
	return confirmText(x), nil
}

// emptiedBy names the buckets a change of the limit old empties, and
// whether it has per-key buckets it leaves as they are.
func emptiedBy(old *limitspec.Spec) ([]string, bool) {
	var keys []string
	for _, b := range restartBuckets(old) {
		keys = append(keys, b.key)
	}
	return keys, old != nil && old.KeyTemplate != ""
}

// unparked says how many of typ's jobs are parked until a calendar quota's
// reset, and how many of them the change to sp brings back: a worker
// re-plans a looser change, moving as many parked jobs as the new quota
// grants in a window (workers/replan.go, parkWave); they stay parked if
// the window already used all of it. v is the type's first row now, old
// its limit.
func (f *fleet) unparked(ctx context.Context, sp limitspec.Spec, old *limitspec.Spec, v *limitView) (parked, back int, err error) {
	parked, _, err = workers.ParkedIn(ctx, f.qrdb, sp.Name)
	if err != nil || parked == 0 {
		return parked, 0, err
	}
	oldMax := map[string]int{}
	if old != nil {
		for _, l := range old.All() {
			if w, ok := calendarOf(l.Limit); ok {
				oldMax[l.Name] = w.Max
			}
		}
	}
	used := 0
	if v != nil && v.Quota != nil && v.Quota.Used != nil {
		used = *v.Quota.Used
	}
	wave := 0
	for _, l := range sp.All() {
		w, ok := calendarOf(l.Limit)
		if !ok {
			continue
		}
		was, had := oldMax[l.Name]
		if w.Max <= used || (had && w.Max <= was) {
			return parked, 0, nil // spent under the new quota, or not raised
		}
		if wave == 0 || w.Max < wave {
			wave = w.Max
		}
	}
	if sp.KeyTemplate != "" && wave > 0 {
		wave = parkScan
	}
	return parked, min(parked, wave, parkScan), nil
}

// parkScan is how many scheduled tasks a worker's re-plan looks at per
// queue (workers/replan.go, replanScan).
const parkScan = 10000

// ticketScan is how many scheduled tasks of a member queue ticketsOf looks
// at, at most.
const ticketScan = 1000

// ticketsOf counts the jobs of v's type sent back holding a turn (a
// ticket), among the first ticketScan scheduled tasks of each member of the
// queues its workers serve; more is true if some were not looked at.
func (f *fleet) ticketsOf(v *limitView) (n int, more bool) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	for _, q := range v.Queues {
		in, err := f.membersWith(ctx, q, "scheduled")
		if err != nil {
			continue
		}
		for member, k := range in {
			ts, err := f.insp.ListScheduledTasks(member, asynq.PageSize(ticketScan))
			if err != nil {
				continue
			}
			more = more || k > len(ts)
			for _, t := range ts {
				if t.Type == v.Type && t.Headers[queue.HeaderTicket] != "" {
					n++
				}
			}
		}
	}
	return n, more
}
