package workers

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// A ticket is a turn booked for a job that goes back to its queue to wait for
// it: a record in the limiter's store (throttle.Limiter.IssueTicket), beside
// the job's bucket, whose id the copy carries in queue.HeaderTicket. When the
// copy comes back it redeems the ticket, which deletes the record, and runs
// at the slot the record names without asking for tokens again. Only the
// record counts: a ticket id that is made up, copied onto other tasks,
// expired, or already redeemed is no ticket, and its job takes a turn like any
// other (see redeem). The record also keeps what the turn was booked under
// (ticketMark), so that a limit changed since voids it.

// ticketTimeout bounds a ticket's store calls: a slow store must not keep a
// job from going back (it goes back without a ticket) or from taking a turn
// (it takes one anew, which copes with the store itself).
const ticketTimeout = time.Second

// issueTicket records a ticket for job j's turn at slot, and returns its id;
// "" if the store cannot take it, and the job then goes back without one (its
// booked turn is lost, its tokens wasted: it takes a new turn when it comes
// back). The call is detached from ctx's cancellation: a job goes back also
// when its handler's context has ended.
func (p *Pool) issueTicket(ctx context.Context, j *job, slot time.Time) string {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ticketTimeout)
	defer cancel()
	t, err := p.cfg.Limiter.IssueTicket(sctx, j.key, slot, ticketMark(j.pol.fp, j.rate))
	if err != nil {
		j.logger().Warn("workers: limiter store unavailable: cannot issue the job a ticket; it goes back without its turn", "err", err)
		return ""
	}
	return t.ID
}

// redeemTicket redeems job j's ticket, and reports whether it stood. A store
// that cannot answer counts as no ticket: the job takes a new turn, and the
// ticket, if it was not redeemed, expires unused.
func (p *Pool) redeemTicket(ctx context.Context, j *job) (throttle.Ticket, bool) {
	sctx, cancel := context.WithTimeout(ctx, ticketTimeout)
	defer cancel()
	t, ok, err := p.cfg.Limiter.RedeemTicket(sctx, j.key, j.meta.Ticket)
	switch {
	case err != nil:
		j.logger().Debug("workers: limiter store unavailable: cannot redeem the ticket; taking a new turn", "err", err)
		return throttle.Ticket{}, false
	case !ok:
		j.logger().Debug("workers: the job's ticket is unknown, expired or already redeemed; taking a new turn")
	}
	return t, ok
}

// ticketMark is what a ticket records of the limits it was booked under:
// the policy's fingerprint, and the adaptive rate if there was one.
func ticketMark(fp string, rate float64) string {
	if rate <= 0 {
		return fp
	}
	return fp + "@" + strconv.FormatFloat(rate, 'g', 6, 64)
}

// ticketVoid reports whether job j's ticket, whose record holds mark, was
// booked under limits that no longer hold, and which: a policy changed since
// (SetPolicy), or an adaptive rate that has since dropped (a turn booked at
// the old pace would spend what the upstream no longer allows). A ticket
// that recorded neither stands.
func (p *Pool) ticketVoid(ctx context.Context, j *job, mark string) (bool, string) {
	if mark == "" {
		return false, ""
	}
	fp, rate, hasRate := strings.Cut(mark, "@")
	if fp != j.pol.fp {
		return true, "the limit changed"
	}
	if !hasRate || j.pol.adaptive == nil {
		return false, ""
	}
	booked, err := strconv.ParseFloat(rate, 64)
	if err != nil {
		return false, ""
	}
	j.rate = booked // kept if the job goes back with its ticket again
	now, err := p.adaptiveRate(context.WithoutCancel(ctx), j)
	if err == nil && dropped(now, booked) {
		return true, "the adaptive rate dropped"
	}
	return false, ""
}
