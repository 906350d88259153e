package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
)

// ErrNotInHandler is matched by the error [Client.Requeue] returns when its
// context is not the context asynq gave a handler.
var ErrNotInHandler = errors.New("queue: context is not an asynq handler's context")

// CopyRetention is the least time a copy made by Requeue is kept among its
// queue's completed tasks after it succeeds (the original's own Retention if
// longer): it holds the copy's task id, so that the original of a worker
// that died after making the copy, which asynq delivers again when its lease
// runs out (within about a minute and a half), does not make it again.
const CopyRetention = 3 * time.Minute

// RequeueTimeout bounds the enqueue a Requeue makes, which runs detached from
// the handler's context so that a shutdown or a task timeout does not lose it.
const RequeueTimeout = 5 * time.Second

// Requeue sends the job that ctx's handler is running back to its queue as a
// copy that comes back after delay. The handler should then return nil (or
// asynq.RevokeTask) so that asynq drops the original: the copy carries on.
// This works for any MaxRetry, including 0 and a last retry, where returning
// a throttled error to asynq would archive the task.
//
// ctx must be the asynq handler's context: Requeue reads the task id, queue,
// retry count and max retry from it, or fails with [ErrNotInHandler]. The
// enqueue itself runs on context.WithoutCancel(ctx), bounded by a few seconds,
// so a shutdown that cancels ctx does not lose the job.
//
// The copy has t's type, payload and headers, with the sluice metadata
// brought up to date: [HeaderOrigin] is kept, or set to the running task's id
// on the first requeue; [HeaderRequeues] goes up by one; [HeaderThrottledSince]
// is kept, or set to now on the first requeue; [HeaderSlot] is slot in Unix
// microseconds, or removed when slot is zero, and [HeaderTicket] is removed
// (see RequeueTicket: a slot without a ticket grants nothing). It goes to the same queue with
// MaxRetry set to the retries the original had left, so throttling never
// spends the retry budget, and with the Timeout, Deadline and Retention
// recorded by [Client.Enqueue]. Other asynq options of the original (Unique,
// Group) are not carried over.
//
// delay is given to asynq as ProcessIn; a negative delay is 0, which makes the
// copy pending at once. asynq keeps the due time in whole Unix seconds,
// truncated, so the copy may be due up to one second before delay has passed
// (and it runs only when a forwarder next looks, every
// Config.DelayedTaskCheckInterval): the caller that holds a reservation should
// sleep out the rest when the copy runs.
//
// The copy's task id is deterministic: the origin id, "~", and the new requeue
// count. If the worker dies after enqueueing the copy but before asynq drops
// the original, the redelivered original's Requeue finds that id taken and
// Requeue returns a nil TaskInfo and a nil error: the copy already exists. This
// protects only while the copy is still known to asynq (pending, scheduled,
// active, retrying, archived, or completed within its retention): asynq frees
// a task id once a task without retention has succeeded. So a copy is kept
// among the completed tasks for at least [CopyRetention] after it succeeds,
// longer than asynq takes to recover the original of a dead worker; without
// it, a copy that ran and succeeded before the original came back would be
// made, and run, again. Any other error is returned wrapped.
func (c *Client) Requeue(ctx context.Context, t *asynq.Task, delay time.Duration, slot time.Time) (*asynq.TaskInfo, error) {
	return c.RequeueTicket(ctx, t, delay, slot, "")
}

// CopyID is the task id of the copy Requeue makes of the task with id id and
// these headers: the chain's origin id, "~", and the requeue count the copy
// will carry. A task asynq delivers again (its worker lost, or a handler
// failed after sending it back) can look it up to learn that it was sent back
// already.
func (m Meta) CopyID(id string) string {
	origin := m.Origin
	if origin == "" {
		origin = id
	}
	return origin + "~" + strconv.Itoa(m.Requeues+1)
}

// RequeueTicket is Requeue for a job that holds a ticket: the id of a turn
// booked for it in the limiter's store (throttle.Limiter.IssueTicket), due
// at slot. The copy carries the id in [HeaderTicket] and slot in
// [HeaderSlot]; both are removed when ticket is "". Only the store's record
// makes a ticket: the headers alone grant nothing.
func (c *Client) RequeueTicket(ctx context.Context, t *asynq.Task, delay time.Duration, slot time.Time, ticket string) (*asynq.TaskInfo, error) {
	if t == nil {
		return nil, errors.New("queue: requeue: nil task")
	}
	id, okID := asynq.GetTaskID(ctx)
	qname, okQueue := asynq.GetQueueName(ctx)
	retried, okRetried := asynq.GetRetryCount(ctx)
	maxRetry, okMaxRetry := asynq.GetMaxRetry(ctx)
	if !okID || !okQueue || !okRetried || !okMaxRetry {
		return nil, fmt.Errorf("queue: requeue %s: %w", t.Type(), ErrNotInHandler)
	}
	if !slot.IsZero() && slot.UnixMicro() <= 0 {
		return nil, fmt.Errorf("queue: requeue %s: slot %v is not after 1970", t.Type(), slot)
	}
	// A malformed sluice header counts as absent, never as a reason to lose
	// the job: its field stays zero and writeTo below leaves it out of the copy.
	m, _ := MetaOf(t)
	copyID := m.CopyID(id)
	if m.Origin == "" {
		m.Origin = id
	}
	m.Requeues++
	if m.ThrottledSince.IsZero() {
		m.ThrottledSince = c.now()
	}
	m.Slot, m.Ticket = slot, ticket

	// The copy keeps what is left of the retry budget: asynq's, or the job's
	// own plus the spare that Client.Enqueue gave asynq.
	budget := max(maxRetry-retried, 0)
	if m.HasMaxRetry {
		m.MaxRetry = max(m.MaxRetry-retried, 0)
		budget = m.MaxRetry + 1
	}

	h := maps.Clone(t.Headers()) // the map is asynq's own message: never write to it
	if h == nil {
		h = make(map[string]string, 4)
	}
	m.writeTo(h)

	opts := []asynq.Option{
		asynq.Queue(qname),
		asynq.MaxRetry(budget),
		asynq.ProcessIn(max(delay, 0)),
		asynq.TaskID(copyID),
	}
	if m.Timeout > 0 {
		opts = append(opts, asynq.Timeout(m.Timeout))
	}
	if !m.Deadline.IsZero() {
		opts = append(opts, asynq.Deadline(m.Deadline))
	}
	opts = append(opts, asynq.Retention(max(m.Retention, CopyRetention)))

	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RequeueTimeout)
	defer cancel()
	info, err := c.ac.EnqueueContext(ectx, asynq.NewTaskWithHeaders(t.Type(), t.Payload(), h), opts...)
	switch {
	case errors.Is(err, asynq.ErrTaskIDConflict):
		return nil, nil // an earlier run of this same job already made the copy
	case err != nil:
		return nil, fmt.Errorf("queue: requeue %s: %w", t.Type(), err)
	}
	return info, nil
}
