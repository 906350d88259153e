package queue

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Client enqueues sluice tasks over an asynq.Client: [Client.Enqueue] sends a
// new [Task], and [Client.Requeue], from inside a handler, sends the running
// job back to its queue.
//
// A Client is safe for concurrent use by multiple goroutines.
type Client struct {
	ac    *asynq.Client
	now   func() time.Time
	lanes *lanes
}

// ClientOption configures a [Client].
type ClientOption func(*clientConfig)

type clientConfig struct {
	now   func() time.Time
	lanes redis.UniversalClient
}

func newClientConfig(opts []ClientOption) clientConfig {
	cfg := clientConfig{now: time.Now}
	for _, opt := range opts {
		opt(&cfg)
	}
	return cfg
}

// WithClock sets the clock the Client reads for the times it writes into
// headers (enqueued-at, throttled-since). The default is time.Now. asynq's
// own scheduling (ProcessIn) always reads time.Now.
func WithClock(now func() time.Time) ClientOption {
	return func(c *clientConfig) {
		if now != nil {
			c.now = now
		}
	}
}

// WithLanes gives each task's Key a lane of its queue (see [Lanes]), kept
// in rdb, which must be the queues' Redis (asynq's): so that one key's
// backlog is never in front of another key's first job at dequeue. Without
// it, every task goes to lane 0 of its priority, as if it had no key.
// cmd/enqueue uses it. See docs/jobs.md, "The queue side".
func WithLanes(rdb redis.UniversalClient) ClientOption {
	return func(c *clientConfig) { c.lanes = rdb }
}

// NewClient returns a Client that enqueues through c, which must not be nil.
// The Client does not own c: closing c is the caller's job.
func NewClient(c *asynq.Client, opts ...ClientOption) *Client {
	cfg := newClientConfig(opts)
	return &Client{ac: c, now: cfg.now, lanes: &lanes{rdb: cfg.lanes, now: cfg.now}}
}

// defaultQueue is asynq's queue for a task enqueued without the Queue option.
const defaultQueue = "default"

// asynqDefaultMaxRetry is asynq's retry budget for a task enqueued without MaxRetry.
const asynqDefaultMaxRetry = 25

// Enqueue validates t and enqueues it as an asynq task. The task's headers are
// t.Headers plus the sluice metadata: Key and Cost when set, the enqueue time,
// and the Timeout, Deadline and Retention found in opts (so that
// [Client.Requeue] can give them to the copy it makes); ctx bounds the enqueue
// call only.
//
// The job's retry budget (its MaxRetry option, or asynq's default of 25) is
// recorded in [HeaderMaxRetry], and asynq is given one retry more. asynq
// counts a worker's death (an expired lease) as a failure and archives a job
// with no retry left, even one that was only waiting for its turn; the spare
// retry lets such a job run again instead. A sluice worker enforces the job's
// own budget on real failures, so MaxRetry(0) still means "never retried
// after a failure".
//
// The task goes to the member of its queue (the asynq.Queue option, else
// "default") for its Priority and its Key's lane: see [Member] and
// [WithLanes]. A task with neither goes to the queue itself. A queue named
// like a member (QUEUE:pN...) is refused: name its base and set Priority.
//
// An invalid task is an error matching [ErrInvalidTask], with no I/O.
func (c *Client) Enqueue(ctx context.Context, t Task, opts ...asynq.Option) (*asynq.TaskInfo, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	m := Meta{Key: t.Key, Cost: t.Cost, Priority: t.Priority, EnqueuedAt: c.now(), MaxRetry: asynqDefaultMaxRetry, HasMaxRetry: true}
	base := defaultQueue
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		// The last option of a kind wins, as in asynq.
		switch v := opt.Value(); opt.Type() {
		case asynq.TimeoutOpt:
			if d, ok := v.(time.Duration); ok {
				m.Timeout = max(d, 0)
			}
		case asynq.DeadlineOpt:
			if d, ok := v.(time.Time); ok {
				m.Deadline = time.Time{} // zero, or before 1970: no deadline to carry
				if d.UnixMicro() > 0 {
					m.Deadline = d
				}
			}
		case asynq.RetentionOpt:
			if d, ok := v.(time.Duration); ok {
				m.Retention = max(d, 0)
			}
		case asynq.MaxRetryOpt:
			if n, ok := v.(int); ok {
				m.MaxRetry = max(n, 0)
			}
		case asynq.QueueOpt:
			if q, ok := v.(string); ok {
				base = q
			}
		}
	}
	if Reserved(base) {
		return nil, fmt.Errorf("%w: queue %q is named like a member of a queue's family (QUEUE:pN, QUEUE:pN:lK): name the queue and set Task.Priority", ErrInvalidTask, base)
	}
	lane, err := c.lanes.of(ctx, base, t.Key)
	if err != nil {
		return nil, fmt.Errorf("queue: enqueue %s: %w", t.Type, err)
	}
	// The last option of a kind wins.
	opts = append(slices.Clone(opts), asynq.MaxRetry(m.MaxRetry+1), asynq.Queue(Member(base, t.Priority, lane)))
	h := maps.Clone(t.Headers)
	if h == nil {
		h = make(map[string]string, 4)
	}
	m.writeTo(h)
	info, err := c.ac.EnqueueContext(ctx, asynq.NewTaskWithHeaders(t.Type, t.Payload, h), opts...)
	if err != nil {
		return nil, fmt.Errorf("queue: enqueue %s: %w", t.Type, err)
	}
	return info, nil
}
