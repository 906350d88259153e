package workers

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file keeps a pool's fetches cheap although it serves every member of
// its queues' families (family.go): 20 asynq queues per configured queue.
// asynq dequeues with one script call per queue, trying the pool's queues
// in the order it drew until one has a job, so with jobs in one member a
// fetch would first try, one round trip each, about half of the empty ones.
//
// skipEmpty is a hook on the pool's own connection to the queues' Redis
// (the one its asynq server uses): a member whose dequeue found it empty is
// taken as empty, with no call, for emptyFor after; a script call of this
// process that puts a job in a member's pending list (an enqueue, a
// come-back moved to the front, asynq's forwarder moving due jobs) ends
// that at once. A job another process enqueues in a member this one took as
// empty is seen at most emptyFor late. Each empty member then costs about
// one call per emptyFor, whatever the rate of jobs.
//
// It reads asynq v0.26's dequeue call by its keys (pending, paused, active,
// lease of one queue), as front.lua writes its key layout.

// skipEmpty is the hook; the zero value is not usable: see newSkipEmpty.
type skipEmpty struct {
	emptyFor time.Duration
	mu       sync.RWMutex
	until    map[string]time.Time // by pending key: taken as empty until then
}

func newSkipEmpty(emptyFor time.Duration) *skipEmpty {
	return &skipEmpty{emptyFor: emptyFor, until: make(map[string]time.Time)}
}

func (h *skipEmpty) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *skipEmpty) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		keys := scriptKeys(cmd.Args())
		if keys == nil {
			return next(ctx, cmd)
		}
		if pending, ok := dequeueOf(keys); ok {
			if h.empty(pending) {
				cmd.SetErr(redis.Nil)
				return redis.Nil
			}
			err := next(ctx, cmd)
			if err == redis.Nil {
				h.mark(pending)
			}
			return err
		}
		err := next(ctx, cmd)
		if err == nil && movedSome(cmd) {
			for _, k := range keys {
				if k, ok := k.(string); ok && strings.HasSuffix(k, ":pending") {
					h.clear(k)
				}
			}
		}
		return err
	}
}

func (h *skipEmpty) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *skipEmpty) empty(pending string) bool {
	h.mu.RLock()
	until, ok := h.until[pending]
	h.mu.RUnlock()
	return ok && time.Now().Before(until)
}

func (h *skipEmpty) mark(pending string) {
	h.mu.Lock()
	h.until[pending] = time.Now().Add(h.emptyFor)
	h.mu.Unlock()
}

func (h *skipEmpty) clear(pending string) {
	h.mu.RLock()
	_, ok := h.until[pending]
	h.mu.RUnlock()
	if ok {
		h.mu.Lock()
		delete(h.until, pending)
		h.mu.Unlock()
	}
}

// scriptKeys is the keys of an EVAL or EVALSHA call, as the call's own
// arguments; nil for any other command.
func scriptKeys(args []any) []any {
	if len(args) < 3 {
		return nil
	}
	if name, _ := args[0].(string); !strings.EqualFold(name, "evalsha") && !strings.EqualFold(name, "eval") {
		return nil
	}
	var n int
	switch v := args[2].(type) {
	case int:
		n = v
	case int64:
		n = int(v)
	default:
		return nil
	}
	if n <= 0 || len(args) < 3+n {
		return nil
	}
	return args[3 : 3+n]
}

// dequeueOf reports whether keys are those of asynq's dequeue of one queue
// (its pending, paused, active and lease keys), and that queue's pending key.
func dequeueOf(keys []any) (string, bool) {
	if len(keys) != 4 {
		return "", false
	}
	pending, _ := keys[0].(string)
	prefix, ok := strings.CutSuffix(pending, "pending")
	if !ok || !strings.HasPrefix(prefix, "asynq:{") {
		return "", false
	}
	for i, suffix := range [...]string{"paused", "active", "lease"} {
		k, _ := keys[i+1].(string)
		if len(k) != len(prefix)+len(suffix) || !strings.HasPrefix(k, prefix) || !strings.HasSuffix(k, suffix) {
			return "", false
		}
	}
	return pending, true
}

// movedSome reports whether a script's reply says it did something: a
// positive integer (asynq's enqueue and forwarder, front.lua), or anything
// other than an integer or nil (to be safe).
func movedSome(cmd redis.Cmder) bool {
	c, ok := cmd.(*redis.Cmd)
	if !ok {
		return true
	}
	switch v := c.Val().(type) {
	case nil:
		return false
	case int64:
		return v > 0
	}
	return true
}
