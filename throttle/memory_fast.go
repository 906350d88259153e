package throttle

import (
	"context"
	"reflect"
	"time"
)

// The memory store's quick path: TryAcquire of a Limit on a bucket without
// holes, the common case of a program that limits in process, with no
// request, interface or allocation. It decides with the token bucket's own
// functions (tbTail, tatAfter, tatFigures), which its module (tbModule,
// lua/tb.lua) calls for the general path, on the TAT held in a variable.

// tryQuick is TryAcquire of n from key under p on l's quick store (stack
// chose it). done is false when the general path must answer: an invalid
// call (whose error it words), or a bucket with holes.
func (l *Limiter) tryQuick(ctx context.Context, key string, p Limit, n int) (res Result, done bool) {
	if key == "" || len(key) > MaxKeyLen || n < 1 || n > p.Burst {
		return Result{}, false
	}
	t, ok := l.interval(p)
	if !ok {
		return Result{}, false
	}
	d, ok := l.quick.tryLimit(l.cfg.prefix, key, t, int64(p.Burst), n)
	if !ok {
		return Result{}, false
	}
	res = Result{Allowed: d.granted, Remaining: d.remaining, ResetAfter: micros(d.reset)}
	if d.granted {
		l.tel.outcome(ctx, key, outGranted)
	} else {
		res.RetryAfter = micros(d.wait)
		l.tel.outcome(ctx, key, outDenied)
	}
	return res, true
}

// interval is p's T if p is valid: from the Limiter's memo of the last
// Limit it checked, or checked now and remembered (a program that takes
// under one Limit checks it once).
func (l *Limiter) interval(p Limit) (pico, bool) {
	if m := l.memo.Load(); m != nil && m.l == p {
		return m.t, true
	}
	t, err := p.checkedPace()
	if err != nil { // invalid: the general path words the error
		return pico{}, false
	}
	l.memo.Store(&limitMemo{l: p, t: t})
	return t, true
}

// limitMemo is a valid Limit and its T.
type limitMemo struct {
	l Limit
	t pico
}

// tryLimit is reserve with no wait for n from token bucket key (T t, burst
// burst), if the bucket has no holes (ok false: it has).
func (m *memoryStore) tryLimit(prefix, key string, t pico, burst int64, n int) (d decision, ok bool) {
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := m.nowMicros()
	k := memKey{prefix: prefix, name: key, kind: kindTB}
	e := s.entries[k]
	var st *tatState
	if e != nil {
		if len(e.hs.list) > 0 {
			return decision{}, false
		}
		if e.st != nil {
			if st, ok = e.st.(*tatState); !ok {
				return decision{}, false
			}
		}
	}
	tat := whole(now) // openTAT: the TAT, never before now
	if st != nil {
		tat = maxPico(st.tat, tat)
	}
	d.now = now
	if e0 := tbTail(tat, t, burst, now, n); e0 > now {
		d.wait = e0 - now
	} else {
		d.granted, d.handle = true, tat // tatModule.commit at now
		tat = tatAfter(tat, t, now, n)
		switch {
		case st != nil:
			st.tat = tat
		case e != nil:
			e.st = &tatState{tat: tat}
		default:
			ne := &memEntry{st: &tatState{tat: tat}}
			s.sweep(now)
			s.entries[k] = ne
		}
	}
	d.remaining, d.reset = tatFigures(tat, t, burst, now)
	return d, true
}

// rebox is p in an interface of its own: the general path keeps the policy
// it is given, and a policy that escaped there would cost every caller an
// allocation, the fast path's included.
func rebox(p Policy) Policy {
	switch p := p.(type) {
	case nil:
		return nil
	case Limit:
		return p
	case FixedWindow:
		return p
	case SlidingLog:
		return p
	case SlidingWindow:
		return p
	case LeakyBucket:
		return p
	case Adaptive:
		return p
	case *Limit:
		return nilOr(p)
	case *FixedWindow:
		return nilOr(p)
	case *SlidingLog:
		return nilOr(p)
	case *SlidingWindow:
		return nilOr(p)
	case *LeakyBucket:
		return nilOr(p)
	case *Adaptive:
		return nilOr(p)
	}
	return foreign{name: reflect.TypeOf(p).String()}
}

// nilOr is *p as a Policy, or a nil pointer's stand-in.
func nilOr[T Policy](p *T) Policy {
	if p == nil {
		return foreign{name: reflect.TypeOf(p).String(), isNil: true}
	}
	return *p
}

// foreign stands, by its type's name, for what asAlgo refuses: a Policy of
// another package (one that embeds a policy of this one), or a nil pointer
// to one of this package's; it is refused in the words used for those.
type foreign struct {
	name  string
	isNil bool
}

func (foreign) isPolicy()                   {}
func (f foreign) validate() error           { return f.err() }
func (foreign) quota() (int, time.Duration) { return 0, 0 }
func (f foreign) String() string            { return f.name }

func (f foreign) err() error {
	if f.isNil {
		return invalidf("policy %s is nil", f.name)
	}
	return invalidf("policy %s is not one of this package's", f.name)
}
