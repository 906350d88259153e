package throttle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The modes of a Limiter, as Mode and WithModeChange report them.
const (
	// ModeShared: calls are decided by the store, whose limits the fleet shares.
	ModeShared = "shared"
	// ModeFallback: under FailLocal, the store has failed and calls are decided
	// by a bucket in this process at its share of each limit.
	ModeFallback = "fallback"
)

// Mode reports where the Limiter's decisions come from: ModeShared, the store;
// while the store cannot answer, ModeFallback under FailLocal (a bucket in
// this process), ModeClosed under FailClosed (calls fail), ModeOpen under
// FailOpen (calls are granted without a limit). The store is judged by the
// calls made to it: the first that fails switches the mode, and the first
// answered switches it back.
func (l *Limiter) Mode() string {
	if l.seam == nil { // a Limiter with a configuration error has no store to judge
		return ModeShared
	}
	return l.seam.mode()
}

// fallback is the state of FailLocal: the mode, when the store may be asked
// again, and the bucket that answers meanwhile. It starts no goroutines: the
// mode moves only as calls come and go.
type fallback struct {
	hosts    func() int
	interval time.Duration
	clock    clock // nil: time.Now
	onChange func(mode string, err error)
	tel      *telemetry
	mem      *memoryStore // the local store, which never fails

	down atomic.Bool // in ModeFallback; read without mu on the fast path

	mu      sync.Mutex // guards what follows and makes mode changes one at a time
	probeAt time.Time  // in fallback: when a call may ask the store again
	probing bool       // a call is asking the store, in fallback
	cause   error      // the store's latest failure
}

func newFallback(c config, tel *telemetry) (*fallback, error) {
	if c.hosts == nil {
		return nil, invalidf("FailLocal needs WithHosts: its local limit is each limit divided by the number of hosts, and without it every host would take the full rate")
	}
	var opts []StoreOption
	if c.clock != nil {
		opts = append(opts, WithClock(c.clock))
	}
	f := &fallback{hosts: c.hosts, interval: c.probeInterval, clock: c.clock, onChange: c.onModeChange, tel: tel}
	f.mem = newMemoryStore(opts...)
	tel.inMode(context.Background(), false, 1)
	return f, nil
}

func (f *fallback) now() time.Time {
	if f.clock != nil {
		return f.clock.Now()
	}
	return time.Now()
}

// verdict is what a store call says about the store.
type verdict int

const (
	answered verdict = iota // it answered: a decision, or a request or client it refused
	failed                  // it could not answer: unreachable, timed out, bad reply
	unknown                 // the caller cancelled it: nothing learned
)

// shortDeadline: a call whose deadline left the store less than this to
// answer, and that ran out, learns nothing about the store. Otherwise any
// caller with a tiny deadline could push the Limiter into fallback (or, under
// FailOpen, be granted) while Redis is healthy.
const shortDeadline = 100 * time.Millisecond

// callStart is when a store call begins, as judge needs it: only a call with a
// deadline can be judged by it, so only then is the clock read (this is the
// hot path of every call).
func callStart(ctx context.Context) time.Time {
	if _, ok := ctx.Deadline(); ok {
		return time.Now()
	}
	return time.Time{}
}

// judge says what a store call that began at start (see callStart) tells about the store.
func judge(ctx context.Context, start time.Time, err error) verdict {
	if err == nil {
		return answered
	}
	if dl, ok := ctx.Deadline(); ok && ctx.Err() != nil && dl.Sub(start) < shortDeadline {
		return unknown
	}
	var inv *invalidError
	var se *storeError
	switch {
	case errors.As(err, &inv):
		return answered
	case errors.As(err, &se) && se.refused: // a misconfiguration: no policy grants through it
		return answered
	case errors.Is(ctx.Err(), context.Canceled):
		return unknown
	}
	return failed
}

// begin says where a call goes: local, straight to the local bucket (in
// fallback, within the probe interval or while another call probes); else to
// the store, and probe says whether that call is the one probe of fallback
// mode. A nil f (any policy but FailLocal) always sends calls to the store.
func (f *fallback) begin() (local, probe bool) {
	if f == nil || !f.down.Load() {
		return false, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !f.down.Load():
		return false, false
	case f.probing || f.now().Before(f.probeAt):
		return true, false
	}
	f.probing = true
	return false, true
}

// end records what the store call of a call that begin sent to it said: a
// failure switches to fallback, an answer to a probe switches back to shared.
// A call that began in shared mode and ends after a switch counts only if it
// failed: only a probe brings the Limiter back.
func (f *fallback) end(probe bool, v verdict, err error) {
	if f == nil || (!probe && v != failed) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if probe {
		f.probing = false
	}
	switch {
	case v == failed:
		f.cause = err
		if probe || !f.down.Load() {
			f.probeAt = f.now().Add(f.interval)
		}
		if !f.down.Load() {
			f.switchTo(true, err)
		}
	case v == answered && f.down.Load():
		f.switchTo(false, nil)
	}
}

// switchTo changes the mode; f.mu must be held.
func (f *fallback) switchTo(down bool, err error) {
	f.down.Store(down)
	f.tel.inMode(context.Background(), down, 1)
	f.tel.inMode(context.Background(), !down, -1)
	if f.onChange != nil {
		mode := ModeShared
		if down {
			mode = ModeFallback
		}
		f.onChange(mode, err)
	}
}

// lastCause is the store failure that the local bucket is standing in for.
func (f *fallback) lastCause() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cause
}

// decide answers req from the local bucket at this host's share of each
// limit; cause is the store failure it stands in for, returned when the local
// bucket cannot serve req. On success *req becomes the request the local store
// answered, and the decision is marked local, so that a Cancel of a
// reservation made from it refunds it there (failure.refund).
func (f *fallback) decide(ctx context.Context, req *request, cause error) (decision, error) {
	loc, err := f.share(*req, cause)
	if err != nil {
		f.tel.outcome(ctx, req.one.Key, outError)
		return decision{}, err
	}
	d := f.mem.decide(loc)
	d.local = true
	if d.granted {
		f.tel.fallback.Add(ctx, 1)
	}
	*req = loc
	return d, nil
}

// share is req with every bucket cut to this host's share of its policy
// (each policy's share), or, if the local bucket cannot serve it, cause with
// the reason.
func (f *fallback) share(req request, cause error) (request, error) {
	n := f.hosts()
	if n < 1 {
		return request{}, fmt.Errorf("%w; local fallback: the number of hosts is unknown (%d)", cause, n)
	}
	loc := req
	if len(req.more) > 0 {
		loc.more = make([]Bucket, len(req.more))
	}
	for i := 0; i < req.len(); i++ {
		b := shareOf(*req.at(i), n)
		if err := b.algo().check(b.N); err != nil {
			return request{}, fmt.Errorf("%w; local fallback: bucket %q as %v, its share over %d hosts: %v", cause, b.Key, b.Limit, n, err)
		}
		*loc.at(i) = b
	}
	return loc, nil
}

// shareOf is b with its policy cut to one host's share among n.
func shareOf(b Bucket, n int) Bucket {
	b.Limit = b.algo().share(n)
	return b
}

// hostShare is b cut to this host's share, for a local call standing in for
// the store, or cause if the number of hosts is unknown.
func (f *fallback) hostShare(b Bucket, cause error) (Bucket, error) {
	n := f.hosts()
	if n < 1 {
		return Bucket{}, fmt.Errorf("%w; local fallback: the number of hosts is unknown (%d)", cause, n)
	}
	return shareOf(b, n), nil
}

// cooldown puts a cooldown on the local bucket, at this host's share of the policy.
func (f *fallback) cooldown(ctx context.Context, prefix string, b Bucket, d time.Duration, cause error) (time.Duration, error) {
	b, err := f.hostShare(b, cause)
	if err != nil {
		return 0, err
	}
	return f.mem.cooldown(ctx, prefix, b, d)
}

// peek reads the local bucket, at this host's share of the policy.
func (f *fallback) peek(ctx context.Context, prefix string, b Bucket, cause error) (State, error) {
	b, err := f.hostShare(b, cause)
	if err != nil {
		return State{}, err
	}
	return f.mem.peek(ctx, prefix, b)
}

// reset forgets the local bucket; the store's is untouched while it is down.
func (f *fallback) reset(ctx context.Context, prefix string, b Bucket, cause error) error {
	b, err := f.hostShare(b, cause)
	if err != nil {
		return err
	}
	return f.mem.reset(ctx, prefix, b)
}
