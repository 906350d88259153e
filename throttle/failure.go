package throttle

import (
	"context"
	"fmt"
	"time"
)

// failure is the layer next to the store: the only code that calls the
// store for a Limiter, and the one that applies its failure policy. It
// judges every store call (judge) and, when the store cannot answer,
// answers as the policy says: FailClosed with the store's error, FailOpen
// with a grant, FailLocal from its local bucket at this host's share, as
// it does without asking the store while in fallback mode (fallback.go).
// Under FailClosed and FailOpen hl follows the store's health; under
// FailLocal fb keeps the mode and the local bucket.
type failure struct {
	st  Store
	cfg config
	tel *telemetry
	fb  *fallback // FailLocal's mode and local bucket; nil under the others
	hl  *health   // the store's health under FailClosed and FailOpen; nil under FailLocal
}

func newFailure(st Store, c config, tel *telemetry) (*failure, error) {
	g := &failure{st: st, cfg: c, tel: tel}
	if c.failure != FailLocal {
		g.hl = newHealth(c)
		return g, nil
	}
	fb, err := newFallback(c, tel)
	if err != nil {
		return nil, err
	}
	g.fb = fb
	return g, nil
}

// mode is Limiter.Mode.
func (g *failure) mode() string {
	if g.fb != nil && g.fb.down.Load() {
		return ModeFallback
	}
	return g.hl.mode()
}

// call is how every call reaches the store. Under FailLocal in fallback
// mode it does not call f, and says local, with the store failure the
// local bucket stands in for; otherwise it calls f, settles what the call
// says about the store, and says local if FailLocal should answer instead
// because the store failed. v is the call's verdict.
func (g *failure) call(ctx context.Context, op string, f func() error) (v verdict, local bool, cause, err error) {
	local, probe := g.fb.begin()
	if local {
		return unknown, true, g.fb.lastCause(), nil
	}
	start := callStart(ctx)
	err = f()
	v = g.settle(ctx, start, probe, op, err)
	if v == failed && g.cfg.failure == FailLocal {
		return v, true, err, nil
	}
	return v, false, nil, err
}

// settle records what a store call that began at start (see callStart)
// returned: in the mode of FailLocal (fallback.go) or the health of the
// others, and as a store error when the store could not answer.
func (g *failure) settle(ctx context.Context, start time.Time, probe bool, op string, err error) verdict {
	v := judge(ctx, start, err)
	g.fb.end(probe, v, err)
	g.hl.record(v, err)
	if err != nil && v != answered {
		g.tel.storeError(ctx, op)
	}
	return v
}

func (g *failure) reserve(ctx context.Context, req request) (decision, request, error) {
	var d decision
	v, local, cause, err := g.call(ctx, "reserve", func() (err error) {
		d, err = g.st.reserve(ctx, req)
		return err
	})
	return g.answer(ctx, req, d, storeDown{v: v, local: local, cause: cause, err: err})
}

// storeDown is what a store call that decided requests said: the verdict v
// and the error err, or that FailLocal answers (local) for the failure cause.
type storeDown struct {
	v          verdict
	local      bool
	cause, err error
}

func (s storeDown) Error() string {
	if s.local {
		return fmt.Sprint(s.cause)
	}
	return fmt.Sprint(s.err)
}

// answer is the decision for req, and the request it answered: d if the
// store answered, else the failure policy's (s).
func (g *failure) answer(ctx context.Context, req request, d decision, s storeDown) (decision, request, error) {
	switch {
	case s.local:
		d, err := g.fb.decide(ctx, &req, s.cause)
		return d, req, err
	case s.err == nil:
		return d, req, nil
	case s.v == failed && g.cfg.failure == FailOpen:
		g.tel.failOpen.Add(ctx, 1)
		g.tel.outcome(ctx, req.one.Key, outFailOpen)
		return decision{granted: true}, req, nil
	}
	g.tel.outcome(ctx, req.one.Key, outError)
	return decision{}, req, s.err
}

// reserveBatch decides reqs in one store call. If the store did not answer
// them, the error is a storeDown, which standIn turns into each one's answer.
func (g *failure) reserveBatch(ctx context.Context, reqs []request) ([]decision, error) {
	var ds []decision
	v, local, cause, err := g.call(ctx, "reserve", func() (err error) {
		ds, err = g.st.reserveBatch(ctx, reqs)
		return err
	})
	if local || err != nil {
		return nil, storeDown{v: v, local: local, cause: cause, err: err}
	}
	return ds, nil
}

// standIn is the failure policy's answer to req, one of a batch whose store
// call failed with err (reserveBatch's), for the caller of ctx.
func (g *failure) standIn(ctx context.Context, req request, err error) (decision, request, error) {
	s, ok := err.(storeDown)
	if !ok {
		s = storeDown{v: failed, err: err}
	}
	return g.answer(ctx, req, decision{}, s)
}

// refund goes where the decision was made: the local bucket, for one
// FailLocal made in fallback.
func (g *failure) refund(ctx context.Context, req request, d decision, id string) (bool, error) {
	if d.local {
		return g.fb.mem.refund(ctx, req, d, id)
	}
	return g.st.refund(ctx, req, d, id)
}

// charge goes where the decision was made, as refund.
func (g *failure) charge(ctx context.Context, req request, d decision, used int, id string) (bool, error) {
	if d.local {
		return g.fb.mem.charge(ctx, req, d, used, id)
	}
	return g.st.charge(ctx, req, d, used, id)
}

func (g *failure) cooldown(ctx context.Context, prefix string, b Bucket, d time.Duration) (time.Duration, error) {
	var next time.Duration
	_, local, cause, err := g.call(ctx, "cooldown", func() (err error) {
		next, err = g.st.cooldown(ctx, prefix, b, d)
		return err
	})
	if local {
		return g.fb.cooldown(ctx, prefix, b, d, cause)
	}
	return next, err
}

func (g *failure) cooldownLeft(ctx context.Context, prefix, key string) (time.Duration, error) {
	var left time.Duration
	_, local, _, err := g.call(ctx, "cooldown", func() (err error) {
		left, err = g.st.cooldownLeft(ctx, prefix, key)
		return err
	})
	if local {
		return g.fb.mem.cooldownLeft(ctx, prefix, key)
	}
	return left, err
}

func (g *failure) peek(ctx context.Context, prefix string, b Bucket) (State, error) {
	var st State
	_, local, cause, err := g.call(ctx, "peek", func() (err error) {
		st, err = g.st.peek(ctx, prefix, b)
		return err
	})
	if local {
		return g.fb.peek(ctx, prefix, b, cause)
	}
	return st, err
}

// reset voids the bucket's tickets, then forgets the bucket (Limiter.Reset).
func (g *failure) reset(ctx context.Context, prefix string, b Bucket) error {
	_, local, cause, err := g.call(ctx, "reset", func() error {
		// The tickets first: a bucket reset with its old tickets still
		// standing would grant their turns again on top of a full bucket.
		if ts, ok := g.st.(ticketStore); ok {
			if err := ts.void(ctx, prefix, b.Key); err != nil {
				return err
			}
		}
		return g.st.reset(ctx, prefix, b)
	})
	if local {
		return g.fb.reset(ctx, prefix, b, cause)
	}
	return err
}

// adapt is Store.adapt; while FailLocal answers, the rate is the ceiling.
func (g *failure) adapt(ctx context.Context, prefix, key string, o adaptOp) (AdaptState, error) {
	var st AdaptState
	_, local, _, err := g.call(ctx, "adapt", func() (err error) {
		st, err = g.st.adapt(ctx, prefix, key, o)
		return err
	})
	if local { // the store is down under FailLocal: the ceiling, this process's share
		return AdaptState{Rate: o.ceiling, Reason: adaptCeiling}, nil
	}
	return st, err
}

func (g *failure) shares(ctx context.Context, prefix, key string, most int) (shareView, error) {
	var v shareView
	_, local, _, err := g.call(ctx, "shares", func() (err error) {
		v, err = g.st.shares(ctx, prefix, key, most)
		return err
	})
	if local {
		return g.fb.mem.shares(ctx, prefix, key, most)
	}
	return v, err
}

// issue is ticketStore.issue on ts, the store's; FailLocal issues none.
func (g *failure) issue(ctx context.Context, ts ticketStore, prefix, key, id string, slot, grace int64, note string) (int64, error) {
	var now int64
	_, local, cause, err := g.call(ctx, "ticket", func() (err error) {
		now, err = ts.issue(ctx, prefix, key, id, slot, grace, note)
		return err
	})
	if local {
		return now, storeErr("ticket", cause)
	}
	return now, err
}

// redeem is ticketStore.redeem on ts, the store's; FailLocal redeems none.
func (g *failure) redeem(ctx context.Context, ts ticketStore, prefix, key, id string) (slot, now int64, note string, ok bool, err error) {
	_, local, cause, err := g.call(ctx, "redeem", func() (err error) {
		slot, now, note, ok, err = ts.redeem(ctx, prefix, key, id)
		return err
	})
	if local {
		return 0, 0, "", false, storeErr("redeem", cause)
	}
	return slot, now, note, ok, err
}
