package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/limitspec"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

func cmdLimits(ctx context.Context, f *fleet, opts options, _ []string, out io.Writer) error {
	views, _, err := f.limits(ctx)
	if err != nil {
		return err
	}
	if opts.json {
		return writeJSON(out, views)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tPOLICY\tSPEC\tSOURCE\tEFFECTIVE/S\tTOKENS\tCOOLDOWN\tGRANTS/S (1m)\tWAITING\tQUEUED\tWORKERS")
	for _, v := range views {
		tokens := "per key"
		if !v.Keyed && v.Tokens != nil {
			tokens = fmt.Sprint(*v.Tokens)
		} else if !v.Keyed {
			tokens = "-"
		}
		source := v.Source
		if v.SetBy != "" {
			source += " (" + v.SetBy + ")"
		}
		workers := fmt.Sprint(v.Workers)
		if v.Conflict {
			workers += " (and others with another spec)"
		}
		queued := "-"
		if v.Queued != nil {
			queued = fmt.Sprintf("%d (%s%s)", *v.Queued, strings.Join(v.Queues, ","), byPriority(v.QueuedByPriority))
		}
		effective := "-"
		if v.EffectiveWhy != "" {
			effective = fmt.Sprintf("%.1f (%s)", v.Effective, v.EffectiveWhy)
		}
		typ := v.Type
		if v.Limit != "" { // one row per named limit
			typ += " (" + v.Limit + ")"
		}
		waiting := fmt.Sprint(v.Waiting)
		if by := byPriority(toInt(v.WaitingByPriority)); by != "" {
			waiting += " (" + strings.TrimPrefix(by, "; ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t%s\t%s\n", typ, v.Policy, v.Spec, source, effective, tokens,
			seconds(v.Cooldown), v.Grants, waiting, queued, workers)
	}
	if len(views) == 0 {
		fmt.Fprintln(tw, "(no limit: no runtime limit is set and no worker reports one)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, v := range views {
		if v.Why != "" { // on the type's first row only
			fmt.Fprintf(out, "%s: %s\n", v.Type, v.Why)
		}
	}
	for _, v := range views {
		if v.Quota == nil {
			continue
		}
		typ := v.Type
		if v.Limit != "" {
			typ += " (" + v.Limit + ")"
		}
		line := fmt.Sprintf("%s: %s", typ, v.Quota.Text)
		if v.Parked > 0 {
			line += fmt.Sprintf("; %s parked until %s", thousands(v.Parked), parkedAt(v.ParkedUntil, v.Quota.Zone))
		}
		fmt.Fprintln(out, line)
	}
	for _, v := range views {
		if v.Malformed != "" {
			fmt.Fprintf(out, "%s: the runtime limit is malformed and no worker applies it: %s (sluice unset %s removes it)\n",
				v.Type, v.Malformed, v.Type)
		}
	}
	for _, v := range views {
		if f := v.InFlight; f != nil { // on the type's first row only
			fmt.Fprintf(out, "%s: in flight %d of auto %d-%d (learned %.1f): %d held, baseline %.1fms, recent %.1fms, %s\n",
				v.Type, f.Bound, f.Floor, f.Ceiling, f.Limit, f.Held, f.BaselineMS, f.RecentMS, f.Why)
		}
	}
	for _, v := range views {
		if v.TenantCount == 0 {
			continue
		}
		fmt.Fprintf(out, "\n%s: %d keys share the global bucket now (fair)\n", v.Type, v.TenantCount)
		tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  KEY\tPRIORITY\tWEIGHT\tSHARE\tBOOKED AHEAD\tWAITING")
		for _, t := range v.Tenants {
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%.0f%%\t%s\t%d\n", t.Key, t.Priority, t.Weight, 100*t.Share, seconds(t.AheadS), t.Waiting)
		}
		if v.TenantCount > len(v.Tenants) {
			fmt.Fprintf(tw, "  (and %d more)\n", v.TenantCount-len(v.Tenants))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return writeLevels(out, views)
}

func cmdSet(ctx context.Context, f *fleet, _ options, args []string, out io.Writer) error {
	return cmdSetBy(ctx, f, args, who(), out)
}

// cmdSetBy sets the runtime limit of one type, specs (one, or one per named
// limit), logged as set by by.
func cmdSetBy(ctx context.Context, f *fleet, specs []string, by string, out io.Writer) error {
	all, err := limitspec.ParseAll(specs)
	if err != nil {
		return cli.Usagef("%w", err)
	}
	if len(all) != 1 {
		return cli.Usagef("set takes the limits of one type at a time, not %d", len(all))
	}
	parsed := all[0]
	var sp limitspec.Spec
	err = f.change(ctx, parsed.Name, func() (err error) {
		sp, err = f.ctl.Set(ctx, specs, by)
		return err
	})
	if err != nil {
		return fmt.Errorf("set %s: %w", parsed.String(), err)
	}
	switch n := f.limiting(ctx, sp.Name); {
	case n < 0: // the heartbeats cannot be read
		fmt.Fprintf(out, "set %s (runtime); every worker that limits %s applies it within a second\n", sp.String(), sp.Name)
	case n == 0:
		fmt.Fprintf(out, "set %s (runtime); but no live worker limits type %q: a worker applies it "+
			"once it runs with a limit for the type (sluice limits lists the types the workers limit)\n", sp.String(), cli.Clip(sp.Name))
	case n == 1:
		fmt.Fprintf(out, "set %s (runtime); the worker that limits %s applies it within a second\n", sp.String(), sp.Name)
	default:
		fmt.Fprintf(out, "set %s (runtime); the %d workers that limit %s apply it within a second\n", sp.String(), n, sp.Name)
	}
	return nil
}

func cmdUnset(ctx context.Context, f *fleet, _ options, args []string, out io.Writer) error {
	var had bool
	err := f.change(ctx, args[0], func() (err error) {
		had, err = f.ctl.Unset(ctx, args[0])
		return err
	})
	if err != nil {
		return fmt.Errorf("unset %s: %w", args[0], err)
	}
	if !had {
		return cli.Usagef("no runtime limit for type %q", args[0])
	}
	fmt.Fprintf(out, "unset %s: the workers' own limits apply again\n", args[0])
	return nil
}

// bucketState is a bucket as inspect shows it.
type bucketState struct {
	Key        string  `json:"key"`
	Remaining  int     `json:"remaining"`
	NextFree   float64 `json:"next_free_s"`
	ResetAfter float64 `json:"reset_after_s"`
	Cooldown   float64 `json:"cooldown_s"`
	// Quota is a calendar quota's used and reset (docs/quotas.md).
	Quota *quotaView `json:"quota,omitempty"`
}

func cmdInspect(ctx context.Context, f *fleet, opts options, args []string, out io.Writer) error {
	if opts.typ == "" && opts.limit == "" {
		rows, err := f.rowsOf(ctx, args[0])
		if err != nil {
			return err
		}
		if rows != nil {
			return inspectType(ctx, f, opts, rows, out)
		}
	}
	b, err := f.bucketOf(ctx, args[0], opts)
	if err != nil {
		return err
	}
	if opts.json {
		return writeJSON(out, b)
	}
	writeBucket(out, b)
	return nil
}

// bucketOf reads bucket key (of --type, --limit in opts) as inspect shows it.
func (f *fleet) bucketOf(ctx context.Context, key string, opts options) (*bucketState, error) {
	pol, bucket, err := f.policyOf(ctx, key, opts.typ, opts.limit)
	if err != nil {
		return nil, err
	}
	st, err := f.lim.Peek(ctx, bucket, pol)
	if err != nil {
		return nil, err
	}
	b := &bucketState{Key: key, Remaining: st.Remaining, NextFree: st.NextFree.Seconds(),
		ResetAfter: st.ResetAfter.Seconds(), Cooldown: st.Cooldown.Seconds()}
	if w, ok := calendarOf(pol); ok {
		b.Quota = quotaOf(w, &b.Remaining, time.Now())
	}
	return b, nil
}

// writeBucket prints b as inspect KEY does.
func writeBucket(out io.Writer, b *bucketState) {
	fmt.Fprintf(out, "%s: %d left, next free in %s, full in %s, cooldown %s\n",
		b.Key, b.Remaining, seconds(b.NextFree), seconds(b.ResetAfter), seconds(b.Cooldown))
	if b.Quota != nil { // a calendar quota: used of it, and its reset
		fmt.Fprintf(out, "%s: %s\n", b.Key, b.Quota.Text)
	}
}

func cmdReset(ctx context.Context, f *fleet, opts options, args []string, out io.Writer) error {
	pol, bucket, err := f.policyOf(ctx, args[0], opts.typ, opts.limit)
	if err != nil {
		return err
	}
	if err := f.lim.Reset(ctx, bucket, pol); err != nil {
		return err
	}
	typ := cmp.Or(opts.typ, args[0])
	if err := f.ctl.Reset(ctx, typ); err != nil {
		fmt.Fprintf(out, "reset %s: the bucket is full, but the workers were not told (%v): its jobs sent back come at their old turns, and take new ones then\n", args[0], err)
		return nil
	}
	fmt.Fprintf(out, "reset %s: the bucket is full; the jobs sent back under the old turns come back now to take new ones\n", args[0])
	return nil
}

// maxCooldown is the longest cooldown the command puts on a bucket.
const maxCooldown = 30 * 24 * time.Hour

// checkBucket checks the KEY argument of inspect, reset and cooldown, and
// --type, before Redis is reached.
func checkBucket(opts options, args []string) error {
	switch key := args[0]; {
	case key == "":
		return cli.Usagef("KEY is empty: want a bucket, such as http:request, or tenant:acme with --type TYPE")
	case len(key) > throttle.MaxKeyLen:
		return cli.Usagef("KEY is %d bytes, longer than %d", len(key), throttle.MaxKeyLen)
	}
	if opts.typ != "" {
		if err := workers.CheckName(opts.typ); err != nil {
			return cli.Usagef("--type %w", err)
		}
	}
	if opts.limit != "" {
		if err := workers.CheckName(opts.limit); err != nil {
			return cli.Usagef("--limit %w", err)
		}
	}
	return checkAsynqmon(opts)
}

// checkCooldown checks cooldown's KEY and DURATION.
func checkCooldown(opts options, args []string) error {
	if err := checkBucket(opts, args); err != nil {
		return err
	}
	_, err := cooldownFor(args[0], args[1])
	return err
}

// durationRe is the form of a Go duration, whatever its size.
var durationRe = regexp.MustCompile(`^[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)

// cooldownFor parses cooldown's DURATION: positive, at most maxCooldown.
func cooldownFor(key, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil && durationRe.MatchString(s) && !strings.HasPrefix(s, "-"):
		return 0, cli.Usagef("cooldown %s %s: the duration is at most %s (30 days)", cli.Clip(key), cli.Clip(s), hours(maxCooldown))
	case err != nil && durationRe.MatchString(s), err == nil && d <= 0:
		return 0, cli.Usagef("cooldown %s %s: the duration must be positive, e.g. 30s", cli.Clip(key), cli.Clip(s))
	case err != nil:
		return 0, cli.Usagef("cooldown %s %q: want a duration such as 30s or 5m", cli.Clip(key), cli.Clip(s))
	case d > maxCooldown:
		return 0, cli.Usagef("cooldown %s %s: the duration is at most %s (30 days)", cli.Clip(key), s, hours(maxCooldown))
	}
	return d, nil
}

// hours writes a whole number of hours as "720h".
func hours(d time.Duration) string { return fmt.Sprintf("%dh", int64(d/time.Hour)) }

func cmdCooldown(ctx context.Context, f *fleet, opts options, args []string, out io.Writer) error {
	d, err := cooldownFor(args[0], args[1])
	if err != nil {
		return err
	}
	pol, bucket, err := f.policyOf(ctx, args[0], opts.typ, opts.limit)
	if err != nil {
		return err
	}
	if _, err := f.lim.Cooldown(ctx, bucket, pol, d); err != nil {
		return err
	}
	fmt.Fprintf(out, "cooldown on %s for %v: no process is granted from it until then\n", args[0], d)
	return nil
}

func cmdWorkers(ctx context.Context, f *fleet, opts options, _ []string, out io.Writer) error {
	hbs, err := f.ctl.Workers(ctx)
	if err != nil {
		return err
	}
	if opts.json {
		return writeJSON(out, hbs)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tPID\tMODE\tVERSION\tLIMITS\tIN FLIGHT\tWAITING\tPROCESSED\t429 COOLDOWNS\tLAST SEEN")
	for _, h := range hbs {
		var limits []string
		for _, l := range h.Limits {
			limits = append(limits, fmt.Sprintf("%s (%s)", l.Spec, l.Source))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s ago\n", h.Host, h.PID, h.Mode, cmp.Or(h.Version, "-"), strings.Join(limits, "; "),
			h.Active, h.Waiting, h.Processed, h.Cooldowns, time.Since(h.Seen).Round(time.Second))
	}
	if len(hbs) == 0 {
		fmt.Fprintln(tw, "(no worker has sent a heartbeat in the last 30s)")
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func seconds(s float64) string {
	if s <= 0 {
		return "-"
	}
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

func cmdDashboard(ctx context.Context, f *fleet, opts options, _ []string, out io.Writer) error {
	return serveDashboard(ctx, newDashboardFor(f, opts, out), out)
}

// toInt is m with int counts.
func toInt(m map[string]int64) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = int(v)
	}
	return out
}

// byPriority says "; p1 80, p5 720" of jobs queued by priority, "" when
// every one has the default priority.
func byPriority(m map[string]int) string {
	if len(m) == 0 || len(m) == 1 && m[strconv.Itoa(queue.DefaultPriority)] > 0 {
		return ""
	}
	var b strings.Builder
	for p := queue.HighestPriority; p <= queue.LowestPriority; p++ {
		if n := m[strconv.Itoa(p)]; n > 0 {
			fmt.Fprintf(&b, ", p%d %d", p, n)
		}
	}
	return ";" + strings.TrimPrefix(b.String(), ",")
}
