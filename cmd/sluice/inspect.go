package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// typeFacts is what sluice inspect TYPE --json prints: the type's own
// bucket as inspect KEY gives it (its fields at the top; absent for a type
// with a key template), the type's rows as sluice limits gives them (the
// first with its buckets, binding, why, tenants and history), and its
// latest archived jobs, newest first.
type typeFacts struct {
	*bucketState
	Limits   []limitView    `json:"limits"`
	Archived []archivedView `json:"archived"`
}

// historySteps is how many of the history's last steps inspect TYPE prints.
const historySteps = 10

// rowsOf is the rows of typ if the fleet limits it with a limit that
// parses (nil otherwise: typ is a bucket key, or its runtime limit is
// malformed, which inspect KEY reports).
func (f *fleet) rowsOf(ctx context.Context, typ string) ([]limitView, error) {
	views, _, err := f.limits(ctx)
	if err != nil {
		return nil, err
	}
	var rows []limitView
	for _, v := range views {
		if v.Type == typ {
			rows = append(rows, v)
		}
	}
	if len(rows) == 0 || rows[0].Malformed != "" || len(rows[0].Buckets) == 0 {
		return nil, nil
	}
	return rows, nil
}

// inspectType prints the facts of the type of rows: the same as the page.
func inspectType(ctx context.Context, f *fleet, opts options, rows []limitView, out io.Writer) error {
	v := rows[0]
	x := typeFacts{Limits: rows}
	if !v.Keyed {
		b, err := f.bucketOf(ctx, v.Type, opts)
		if err != nil {
			return err
		}
		x.bucketState = b
	}
	qs, _ := f.queues(v.Queues)
	x.Archived, _ = f.archivedOf(qs, v.Type, opts.asynqmon)
	if opts.json {
		return writeJSON(out, x)
	}
	if x.bucketState != nil {
		writeBucket(out, x.bucketState)
	}
	fmt.Fprintf(out, "%s: %s\n", v.Type, v.Why)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  BUCKET\tCONFIGURED/S\tEFFECTIVE/S\tTOKENS\tCOOLDOWN\tCAUSE")
	for _, b := range v.Buckets {
		mark := " "
		if b.Binds {
			mark = "*"
		}
		tokens := "-"
		if b.Tokens != nil {
			tokens = fmt.Sprint(*b.Tokens)
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\t%s\t%s\n", mark, b.Name, perS(b.RatePerS), perS(b.EffectivePerS), tokens, seconds(b.Cooldown), b.Cause)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	queued := "-"
	if v.Queued != nil {
		queued = fmt.Sprintf("%d (%s%s)", *v.Queued, strings.Join(v.Queues, ","), byPriority(v.QueuedByPriority))
	}
	line := fmt.Sprintf("waiting %d, queued %s, parked %d", v.Waiting, queued, v.Parked)
	if v.Parked > 0 && v.Quota != nil {
		line += " until " + parkedAt(v.ParkedUntil, v.Quota.Zone)
	}
	fmt.Fprintln(out, line)
	if len(v.Tenants) > 0 && v.Tenants[0].Weight == 0 { // no fair shares: only the waits are known
		fmt.Fprintf(out, "\nkeys whose jobs waited longest over the last %v:\n", tenantWaitsOver)
		tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  KEY\tLONGEST WAIT")
		for _, t := range v.Tenants {
			fmt.Fprintf(tw, "  %s\t%s\n", t.Key, seconds(t.LongestWaitS))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	} else if len(v.Tenants) > 0 {
		fmt.Fprintf(out, "\ntenants with turns ahead (%d):\n", v.TenantCount)
		tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  KEY\tPRIORITY\tSHARE\tWEIGHT\tWAITING\tAHEAD\tLONGEST WAIT")
		for _, t := range v.Tenants {
			fmt.Fprintf(tw, "  %s\t%d\t%.0f%%\t%d\t%d\t%s\t%s\n", t.Key, t.Priority, 100*t.Share, t.Weight, t.Waiting, seconds(t.AheadS), seconds(t.LongestWaitS))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if err := writeLevels(out, rows[:1]); err != nil {
		return err
	}
	if err := writeHistory(out, v.History); err != nil {
		return err
	}
	if len(x.Archived) == 0 {
		fmt.Fprintln(out, "\narchived: none in the queues its workers serve")
		return nil
	}
	fmt.Fprintf(out, "\narchived (latest %d):\n", len(x.Archived))
	tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  FAILED AT\tQUEUE\tID\tREASON")
	for _, a := range x.Archived {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", a.FailedAt.Format(time.RFC3339), a.Queue, a.ID, oneLine(a.Reason))
	}
	return tw.Flush()
}

// writeHistory prints the last historySteps steps of h, one line each.
func writeHistory(out io.Writer, h *historyView) error {
	if h == nil || len(h.Points) == 0 {
		_, err := fmt.Fprintln(out, "\nhistory: none (no worker has written one)")
		return err
	}
	ps := h.Points[max(len(h.Points)-historySteps, 0):]
	fmt.Fprintf(out, "\nhistory, the last %d steps of %s:\n", len(ps), time.Duration(h.StepS*float64(time.Second)))
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AT\tGRANTS/S\tREFUSED\tWAITING\tQUEUED")
	for _, p := range ps {
		fmt.Fprintf(tw, "  %s\t%.1f\t%.0f\t%.0f\t%.0f\n", p.At.UTC().Format("15:04:05"), p.Grants/h.StepS, p.Refused, p.Waiting, p.Queued)
	}
	return tw.Flush()
}

// perS writes a rate per second, or - for none.
func perS(r float64) string {
	if r < 0 {
		return "-"
	}
	return fmt.Sprintf("%.4g", r)
}

// oneLine is s on one line, at most 120 bytes.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = strings.ToValidUTF8(s[:117], "") + "..."
	}
	return s
}
