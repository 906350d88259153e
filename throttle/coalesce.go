package throttle

import (
	"context"
	"sync"
	"time"
)

// Coalescing: the calls of one shape in one Limiter share store round trips.
//
// A call's shape is its buckets (keys, policies and n, at most two buckets)
// and its Share if it has one (tenant, priority, weight...); calls of one
// shape differ only in how long they accept to wait.
// The first call of a shape goes to the store at once, alone, as it would
// without coalescing. Calls of that shape that come while a call of it is
// out queue up; when it returns they go, the whole queue (up to maxBatch),
// in one script call (lua/reserve_batch.lua) that decides them one after
// the other, as the same calls reaching the server one after another at
// that instant would be decided; and so on while calls keep coming. The
// store's answer to each is exact, its own reply with its own handles: a
// grant is refunded, waited for or lost like any other.
//
// A queued call waits for the call in flight and then for its batch, about
// what it would have waited for the server to serve the calls ahead of it.
// If its context ends while it is queued it leaves the queue; if it ends
// while its batch is out, it returns the context's error and a grant made
// for it is cancelled (refunded if its slot lies ahead). Batches are sent by
// a goroutine of their own, so no caller's context bounds another's call.

// maxBatch bounds the calls one script call decides.
const maxBatch = 256

// batchGrace is how long a batch's store call may outlast the latest of its
// callers' deadlines, by which time they have all left.
const batchGrace = 100 * time.Millisecond

// shape is what the calls of one batch have in common.
type shape struct {
	prefix   string
	one, two Bucket // without their Share pointers: sh is the Share's value
	k        int
	sh       share
}

// shapeOf is req's shape, or false for a call that is not coalesced.
func shapeOf(req *request) (shape, bool) {
	if req.len() > 2 {
		return shape{}, false
	}
	s := shape{prefix: req.prefix, one: req.one, k: req.len()}
	if s.k == 2 {
		s.two = req.more[0]
	}
	if req.share != nil {
		s.sh, s.one.Share, s.two.Share = *req.share, nil, nil
	}
	return s, true
}

// coalescer is the coalescing layer (stack): it changes how reserve reaches
// the layers below, and passes every other call to them.
type coalescer struct {
	seam           // the layers below
	lim   *Limiter // whose Reservation gives back a grant its caller left
	mu    sync.Mutex
	lines map[shape]*line // a shape with a call out, and the calls queued behind it
}

type line struct{ queue []*queued }

// queued is one call waiting in a line; its fields are set under the
// coalescer's lock.
type queued struct {
	ctx       context.Context
	req       request
	done      chan struct{} // closed when answered
	taken     bool          // in a batch that is out
	abandoned bool          // its caller left while its batch was out
	d         decision
	err       error
}

func newCoalescer(below seam, l *Limiter) *coalescer {
	return &coalescer{seam: below, lim: l, lines: make(map[shape]*line)}
}

// reserve is reserve through the line of req's shape, for a call that has one.
func (c *coalescer) reserve(ctx context.Context, req request) (decision, request, error) {
	sh, ok := shapeOf(&req)
	if !ok {
		return c.seam.reserve(ctx, req)
	}
	c.mu.Lock()
	ln := c.lines[sh]
	if ln == nil {
		c.lines[sh] = &line{}
		c.mu.Unlock()
		d, req, err := c.seam.reserve(ctx, req)
		c.next(sh)
		return d, req, err
	}
	q := &queued{ctx: ctx, req: req, done: make(chan struct{})}
	ln.queue = append(ln.queue, q)
	c.mu.Unlock()

	select {
	case <-q.done:
	case <-ctx.Done():
		c.mu.Lock()
		select {
		case <-q.done: // answered meanwhile
			c.mu.Unlock()
		default:
			if q.taken {
				q.abandoned = true
			} else {
				c.remove(sh, q)
			}
			c.mu.Unlock()
			return decision{}, req, ctx.Err()
		}
	}
	return q.d, q.req, q.err // a local answer changes the request (fallback.decide)
}

// remove takes q out of its line's queue. c.mu is held.
func (c *coalescer) remove(sh shape, q *queued) {
	ln := c.lines[sh]
	for i, o := range ln.queue {
		if o == q {
			ln.queue = append(ln.queue[:i:i], ln.queue[i+1:]...)
			return
		}
	}
}

// next sends the calls queued behind shape sh's call that returned, from
// a goroutine that goes on while calls keep coming; or, if none are
// queued, ends the line.
func (c *coalescer) next(sh shape) {
	if batch := c.take(sh); batch != nil {
		go c.run(sh, batch)
	}
}

// take takes the next batch of shape sh off its queue, or ends the line and
// returns nil if nothing is queued.
func (c *coalescer) take(sh shape) []*queued {
	c.mu.Lock()
	defer c.mu.Unlock()
	ln := c.lines[sh]
	if len(ln.queue) == 0 {
		delete(c.lines, sh)
		return nil
	}
	k := min(len(ln.queue), maxBatch)
	batch := make([]*queued, k)
	copy(batch, ln.queue)
	ln.queue = ln.queue[k:]
	for _, q := range batch {
		q.taken = true
	}
	return batch
}

// run sends batches of shape sh until its queue is empty.
func (c *coalescer) run(sh shape, batch []*queued) {
	for ; batch != nil; batch = c.take(sh) {
		c.decideBatch(batch)
		var lost []*queued
		c.mu.Lock()
		for _, q := range batch {
			if q.abandoned && q.err == nil && q.d.granted {
				lost = append(lost, q)
			}
			close(q.done)
		}
		c.mu.Unlock()
		for _, q := range lost {
			// Its caller left: give the turn back where its slot lies ahead.
			_ = newReservation(c.lim, q.req, q.d).Cancel(context.WithoutCancel(q.ctx))
		}
	}
}

// decideBatch is reserve for the calls of one batch, in one store call.
// The call is bounded by the latest of the callers' deadlines and a grace
// of batchGrace, or by none if one has none (the client's own timeouts then
// bound it). A caller leaves at its own deadline without waiting for the
// call, so each sees its own context's error, never one of the batch's.
func (c *coalescer) decideBatch(batch []*queued) {
	ctx := context.WithoutCancel(batch[0].ctx)
	var last time.Time
	for _, q := range batch {
		dl, ok := q.ctx.Deadline()
		if !ok {
			last = time.Time{}
			break
		}
		if dl.After(last) {
			last = dl
		}
	}
	if !last.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, last.Add(batchGrace))
		defer cancel()
	}
	reqs := make([]request, len(batch))
	for i, q := range batch {
		reqs[i] = q.req
	}
	ds, err := c.seam.reserveBatch(ctx, reqs)
	for i, q := range batch {
		if err != nil {
			q.d, q.req, q.err = c.seam.standIn(q.ctx, q.req, err)
		} else {
			q.d = ds[i]
		}
	}
}
