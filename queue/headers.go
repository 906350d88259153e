package queue

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
)

// Header names under which sluice keeps its metadata in an asynq task's
// headers. Every name starting with "sluice-" is reserved; [Task.Validate]
// rejects extra headers that use the prefix.
//
// Times are decimal Unix microseconds; durations are Go duration strings
// ([time.Duration.String]).
const (
	HeaderKey            = "sluice-key"             // optional throttle key for this task (e.g. a tenant id)
	HeaderCost           = "sluice-cost"            // optional tokens this task costs (positive int)
	HeaderEnqueuedAt     = "sluice-enqueued-at"     // unix microseconds, set by Client.Enqueue
	HeaderThrottledSince = "sluice-throttled-since" // unix microseconds, first time the job was sent back
	HeaderRequeues       = "sluice-requeues"        // how many times it was sent back
	HeaderSlot           = "sluice-slot"            // unix microseconds: the slot of the job's ticket, for people (the worker trusts only the ticket)
	HeaderTicket         = "sluice-ticket"          // the id of the ticket the job holds: a turn booked in the limiter's store, redeemed once
	HeaderOrigin         = "sluice-origin"          // task id of the first task in the chain
	HeaderTimeout        = "sluice-timeout"         // asynq Timeout option given at enqueue, Go duration string
	HeaderDeadline       = "sluice-deadline"        // asynq Deadline option, unix microseconds
	HeaderRetention      = "sluice-retention"       // asynq Retention option, Go duration string
	HeaderMaxRetry       = "sluice-max-retry"       // the job's own retry budget (asynq holds one more: see Client.Enqueue)
	HeaderPriority       = "sluice-priority"        // the job's priority, 1 (first) to 5 (last); absent means DefaultPriority
	HeaderParkedUntil    = "sluice-parked-until"    // unix microseconds: the calendar quota's reset the job was last parked for (docs/quotas.md)
	HeaderParks          = "sluice-parks"           // how many times the job was parked for that reset
)

// Priorities a job may have: 1 goes first, 5 last. A job without one has
// DefaultPriority. See docs/priorities.md.
const (
	HighestPriority = 1
	DefaultPriority = 3
	LowestPriority  = 5
)

// reservedPrefix starts every header name sluice owns.
const reservedPrefix = "sluice-"

// ErrBadHeader is matched by the error [MetaOf] returns for a sluice header
// whose value cannot be parsed.
var ErrBadHeader = errors.New("queue: bad sluice header")

// Meta is the sluice metadata read from a task's headers by [MetaOf].
// A zero field means the header is absent.
type Meta struct {
	Key            string        // throttle key; "" lets the worker's policy decide
	Cost           int           // tokens the task costs; 0 lets the policy decide
	EnqueuedAt     time.Time     // when Client.Enqueue sent the first task of the chain
	ThrottledSince time.Time     // when the job was first sent back
	Slot           time.Time     // the slot of the ticket the job holds, as its issuer saw it (informative)
	Ticket         string        // the id of the ticket the job holds; "" if none
	Requeues       int           // how many times the job was sent back
	Origin         string        // task id of the first task of the chain
	Timeout        time.Duration // asynq Timeout option given at enqueue
	Retention      time.Duration // asynq Retention option given at enqueue
	Deadline       time.Time     // asynq Deadline option given at enqueue
	MaxRetry       int           // the job's own retry budget, if HasMaxRetry
	HasMaxRetry    bool          // Client.Enqueue recorded MaxRetry (asynq then holds one spare retry)
	Priority       int           // 1 (first) to 5 (last); 0 means absent, which is DefaultPriority
	ParkedUntil    time.Time     // the calendar quota's reset the job was last parked for (sent back to come after it)
	Parks          int           // how many times it was parked for ParkedUntil
}

// PriorityOr is m's priority, or DefaultPriority when the header is absent.
func (m Meta) PriorityOr() int {
	if m.Priority == 0 {
		return DefaultPriority
	}
	return m.Priority
}

// MetaOf reads the sluice metadata from t's headers. Absent headers, and
// headers with an empty value, leave their field zero. A malformed value is
// an error matching [ErrBadHeader] that names the header; the other fields
// are still filled in.
func MetaOf(t *asynq.Task) (Meta, error) {
	if t == nil {
		return Meta{}, nil
	}
	return parseMeta(t.Headers())
}

func parseMeta(h map[string]string) (Meta, error) {
	var m Meta
	if len(h) == 0 {
		return m, nil
	}
	var errs []error
	for _, f := range metaFields {
		v, ok := h[f.name]
		if !ok || v == "" {
			continue
		}
		if err := f.set(&m, v); err != nil {
			errs = append(errs, fmt.Errorf("%w %s=%q: %v", ErrBadHeader, f.name, v, err))
		}
	}
	return m, errors.Join(errs...)
}

// metaFields are the headers parseMeta reads, in order, each with how its
// value goes into a Meta. A table of plain functions rather than closures
// over the Meta keeps parseMeta's stack frame small: it runs at the start of
// every job, on a goroutine asynq has just made, whose stack would grow (a
// copy) for a large frame.
var metaFields = [...]struct {
	name string
	set  func(m *Meta, v string) error
}{
	{HeaderKey, func(m *Meta, v string) error {
		if err := checkText(v, MaxKeyLen); err != nil {
			return err
		}
		m.Key = v
		return nil
	}},
	{HeaderCost, func(m *Meta, v string) (err error) {
		m.Cost, err = parseInt(v, 1, MaxCost)
		return err
	}},
	{HeaderEnqueuedAt, func(m *Meta, v string) (err error) {
		m.EnqueuedAt, err = parseMicros(v)
		return err
	}},
	{HeaderThrottledSince, func(m *Meta, v string) (err error) {
		m.ThrottledSince, err = parseMicros(v)
		return err
	}},
	{HeaderSlot, func(m *Meta, v string) (err error) {
		m.Slot, err = parseMicros(v)
		return err
	}},
	{HeaderTicket, func(m *Meta, v string) error {
		if err := checkText(v, maxTicketLen); err != nil {
			return err
		}
		m.Ticket = v
		return nil
	}},
	{HeaderRequeues, func(m *Meta, v string) (err error) {
		m.Requeues, err = parseInt(v, 0, maxInt)
		return err
	}},
	{HeaderOrigin, func(m *Meta, v string) error {
		if err := checkText(v, maxOriginLen); err != nil {
			return err
		}
		m.Origin = v
		return nil
	}},
	{HeaderTimeout, func(m *Meta, v string) (err error) {
		m.Timeout, err = parseDuration(v)
		return err
	}},
	{HeaderMaxRetry, func(m *Meta, v string) (err error) {
		m.MaxRetry, err = parseInt(v, 0, maxInt-1)
		m.HasMaxRetry = err == nil
		return err
	}},
	{HeaderRetention, func(m *Meta, v string) (err error) {
		m.Retention, err = parseDuration(v)
		return err
	}},
	{HeaderDeadline, func(m *Meta, v string) (err error) {
		m.Deadline, err = parseMicros(v)
		return err
	}},
	{HeaderParkedUntil, func(m *Meta, v string) (err error) {
		m.ParkedUntil, err = parseMicros(v)
		return err
	}},
	{HeaderParks, func(m *Meta, v string) (err error) {
		m.Parks, err = parseInt(v, 0, maxInt)
		return err
	}},
	{HeaderPriority, func(m *Meta, v string) (err error) {
		m.Priority, err = parseInt(v, HighestPriority, LowestPriority)
		return err
	}},
}

// writeTo stores m in h: each non-zero field under its header, and each zero
// field's header removed. Headers m does not know about are left alone.
func (m Meta) writeTo(h map[string]string) {
	setText(h, HeaderKey, m.Key)
	setInt(h, HeaderCost, m.Cost)
	setMicros(h, HeaderEnqueuedAt, m.EnqueuedAt)
	setMicros(h, HeaderThrottledSince, m.ThrottledSince)
	setMicros(h, HeaderSlot, m.Slot)
	setText(h, HeaderTicket, m.Ticket)
	setInt(h, HeaderRequeues, m.Requeues)
	setText(h, HeaderOrigin, m.Origin)
	setDuration(h, HeaderTimeout, m.Timeout)
	setDuration(h, HeaderRetention, m.Retention)
	if m.HasMaxRetry {
		h[HeaderMaxRetry] = strconv.Itoa(m.MaxRetry) // 0 is a budget, not absence
	} else {
		delete(h, HeaderMaxRetry)
	}
	setMicros(h, HeaderDeadline, m.Deadline)
	setInt(h, HeaderPriority, m.Priority)
	setMicros(h, HeaderParkedUntil, m.ParkedUntil)
	setInt(h, HeaderParks, m.Parks)
}

const (
	maxInt       = int(^uint(0) >> 1)
	maxOriginLen = 1024 // asynq task ids are UUIDs unless the caller chose one
	maxTicketLen = 64   // the limiter's ticket ids are 32 hex digits
)

func parseInt(v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, errors.New("not an integer")
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("out of range [%d, %d]", lo, hi)
	}
	return n, nil
}

func parseMicros(v string) (time.Time, error) {
	us, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, errors.New("not an integer of Unix microseconds")
	}
	if us <= 0 {
		return time.Time{}, errors.New("not a positive Unix time")
	}
	return time.UnixMicro(us), nil
}

func parseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errors.New("not a Go duration")
	}
	if d < 0 {
		return 0, errors.New("negative duration")
	}
	return d, nil
}

func setText(h map[string]string, name, v string) {
	if v == "" {
		delete(h, name)
		return
	}
	h[name] = v
}

func setInt(h map[string]string, name string, n int) {
	if n == 0 {
		delete(h, name)
		return
	}
	h[name] = strconv.Itoa(n)
}

func setMicros(h map[string]string, name string, t time.Time) {
	if t.IsZero() {
		delete(h, name)
		return
	}
	h[name] = strconv.FormatInt(t.UnixMicro(), 10)
}

func setDuration(h map[string]string, name string, d time.Duration) {
	if d == 0 {
		delete(h, name)
		return
	}
	h[name] = d.String()
}
