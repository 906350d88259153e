package queue

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Limits that [Task.Validate] enforces.
const (
	MaxTypeLen = 256     // bytes in Task.Type
	MaxKeyLen  = 256     // bytes in Task.Key
	MaxCost    = 1 << 20 // tokens in Task.Cost
	MaxPayload = 1 << 20 // bytes in Task.Payload
)

// ErrInvalidTask is matched by the error [Task.Validate] returns, and so by
// the error [Client.Enqueue] returns for a task it refuses to send.
var ErrInvalidTask = errors.New("queue: invalid task")

// Task is the envelope: an asynq task type and payload plus optional throttle
// metadata. [Client.Enqueue] sends it as an asynq task whose headers carry the
// metadata; workers read it back with [MetaOf].
//
// The zero value is not a valid task: Type is required.
type Task struct {
	Type    string
	Payload []byte
	Key     string            // optional throttle key; "" means the worker's policy decides
	Cost    int               // tokens; 0 means the policy's default
	Headers map[string]string // extra headers carried with the task
	// Priority is 1 (first) to 5 (last); 0 means DefaultPriority. It is
	// carried in HeaderPriority and picks the member of the task's queue
	// that holds it (see Member).
	Priority int
}

// Validate reports whether t may be enqueued: Type is not blank, at most
// [MaxTypeLen] bytes and free of control characters; Key is at most
// [MaxKeyLen] bytes and free of control characters; Cost is in
// [0, [MaxCost]]; Priority is 0 or in [HighestPriority, LowestPriority];
// Payload is at most [MaxPayload] bytes; and no extra header name starts with the reserved "sluice-" prefix (in any letter case).
// The error matches [ErrInvalidTask].
func (t Task) Validate() error {
	if strings.TrimSpace(t.Type) == "" {
		return fmt.Errorf("%w: type is empty", ErrInvalidTask)
	}
	if err := checkText(t.Type, MaxTypeLen); err != nil {
		return fmt.Errorf("%w: type: %v", ErrInvalidTask, err)
	}
	if err := checkText(t.Key, MaxKeyLen); err != nil {
		return fmt.Errorf("%w: key: %v", ErrInvalidTask, err)
	}
	if t.Cost < 0 || t.Cost > MaxCost {
		return fmt.Errorf("%w: cost %d is out of range [0, %d]", ErrInvalidTask, t.Cost, MaxCost)
	}
	if t.Priority != 0 && (t.Priority < HighestPriority || t.Priority > LowestPriority) {
		return fmt.Errorf("%w: priority %d is out of range [%d, %d] (1 first, 5 last; 0 for the default, %d)",
			ErrInvalidTask, t.Priority, HighestPriority, LowestPriority, DefaultPriority)
	}
	if len(t.Payload) > MaxPayload {
		return fmt.Errorf("%w: payload is %d bytes, more than %d", ErrInvalidTask, len(t.Payload), MaxPayload)
	}
	for name := range t.Headers {
		if strings.HasPrefix(strings.ToLower(name), reservedPrefix) {
			return fmt.Errorf("%w: header %q uses the reserved prefix %q", ErrInvalidTask, name, reservedPrefix)
		}
	}
	return nil
}

// checkText reports whether s is at most limit bytes with no control characters.
func checkText(s string, limit int) error {
	if len(s) > limit {
		return fmt.Errorf("%d bytes, more than %d", len(s), limit)
	}
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		return fmt.Errorf("control character at byte %d", i)
	}
	return nil
}
