package workers

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/queue"
)

// This file is how a pool's fetch finds the right member of a family at
// one call, although it serves every member of its queues' families
// (family.go): 20 asynq queues per configured queue.
//
// asynq dequeues with one script call per queue, trying the pool's queues
// in an order it draws until one has a job: with jobs in one member, a
// fetch would first try, one round trip each, about half of the empty
// ones. chooser is a hook on the pool's own connection to the queues' Redis
// (the one its asynq server uses) that answers asynq's dequeue of a member
// of a family with a dequeue of the member this pool should take a job
// from now, within the same family (so the configured queues' weights are
// asynq's, as before):
//
//   - the members a dequeue of this process found empty are taken as empty,
//     with no call, for emptyFor after; a script call of this process that
//     puts a job in a member's pending list (an enqueue, a come-back moved
//     to the front, asynq's forwarder moving due jobs) ends that at once. A
//     job another process enqueues in a member this one took as empty is
//     seen at most emptyFor late;
//   - among the others, the highest priority with jobs is taken, its lanes
//     drawn alike, but for one fetch in lowEvery, which is the lower
//     priorities' (drawn among them by levelWeight): strict priority with a
//     floor at dequeue, as the bucket grants (docs/priorities.md). Under
//     StrictPriority there is no such floor.
//
// asynq reads the queue of the job it got from the job itself, never from
// the name it asked for, so the job is run, acknowledged and leased in its
// own member. The hook reads asynq v0.26's dequeue call by its keys
// (pending, paused, active and lease of one queue) and arguments, as
// front.lua writes its key layout; any other call goes through untouched.

// chooser is the hook; the zero value is not usable: see newChooser.
type chooser struct {
	emptyFor time.Duration
	strict   bool
	mu       sync.Mutex
	until    map[string]time.Time // by queue name: taken as empty until then
	families map[string]*fetches  // by the name asynq asked for: its family
}

// fetches is a family as the chooser sees it: its members, highest
// priority first, and how many fetches it has answered.
type fetches struct {
	members []member
	n       int
}

// lowEvery makes one fetch in lowEvery the lower priorities' while a higher
// one has jobs: 8 %, above the bucket's default floor of 5 %, so that the
// floor has jobs to grant.
const lowEvery = 12

// member is a queue of a family, with its priority.
type member struct {
	name string
	prio int
}

func newChooser(emptyFor time.Duration, strict bool) *chooser {
	return &chooser{emptyFor: emptyFor, strict: strict, until: make(map[string]time.Time), families: make(map[string]*fetches)}
}

// family is asked's family; under mu.
func (h *chooser) family(asked string) *fetches {
	if f, ok := h.families[asked]; ok {
		return f
	}
	base, _, _, _ := queue.ParseMember(asked)
	f := &fetches{}
	for p := queue.HighestPriority; p <= queue.LowestPriority; p++ {
		for lane := range queue.Lanes {
			f.members = append(f.members, member{queue.Member(base, p, lane), p})
		}
	}
	h.families[asked] = f // bounded: asynq asks for the pool's queues only
	return f
}

func (h *chooser) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *chooser) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *chooser) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		keys := scriptKeys(args)
		if keys == nil {
			return next(ctx, cmd)
		}
		if asked, ok := dequeueOf(args); ok {
			member, any := h.choose(asked)
			if !any {
				cmd.SetErr(redis.Nil)
				return redis.Nil
			}
			if member != asked {
				setDequeue(args, member)
			}
			err := next(ctx, cmd)
			if err == redis.Nil {
				h.mark(member)
			}
			return err
		}
		err := next(ctx, cmd)
		if err == nil && movedSome(cmd) {
			for _, k := range keys {
				if k, ok := k.(string); ok {
					if q, ok := queueOfPending(k); ok {
						h.clear(q)
					}
				}
			}
		}
		return err
	}
}

// choose is the member of asked's family to dequeue from, and false if
// every member is taken as empty. A queue that is no family's member, or
// the base of one, is asked's own family.
func (h *chooser) choose(asked string) (string, bool) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.family(asked)
	empty := func(m member) bool {
		until, ok := h.until[m.name]
		return ok && now.Before(until)
	}
	top, lower := 0, false
	for _, m := range f.members {
		switch {
		case empty(m):
		case top == 0:
			top = m.prio
		case m.prio > top:
			lower = true
		}
	}
	if top == 0 {
		return "", false
	}
	f.n++
	low := lower && !h.strict && f.n%lowEvery == 0
	var (
		pick  string
		total int
	)
	for _, m := range f.members {
		if empty(m) || low != (m.prio > top) {
			continue
		}
		w := 1 // the top priority's lanes alike
		if low {
			w = levelWeight(m.prio)
		}
		// A weighted draw in one pass: m replaces the pick with
		// probability w over the weight seen so far.
		total += w
		if rand.IntN(total) < w {
			pick = m.name
		}
	}
	return pick, true
}

func (h *chooser) mark(q string) {
	h.mu.Lock()
	h.until[q] = time.Now().Add(h.emptyFor)
	h.mu.Unlock()
}

func (h *chooser) clear(q string) {
	h.mu.Lock()
	delete(h.until, q)
	h.mu.Unlock()
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

// dequeueOf reports whether args are asynq v0.26's dequeue of one queue:
// EVALSHA or EVAL, the script, 4, its pending, paused, active and lease
// keys, the lease's expiry and its task key prefix; and the queue's name.
func dequeueOf(args []any) (string, bool) {
	if len(args) != 9 {
		return "", false
	}
	pending, _ := args[3].(string)
	q, ok := queueOfPending(pending)
	if !ok {
		return "", false
	}
	want := dequeueArgs(q)
	for i, w := range want {
		if s, _ := args[3+i].(string); s != w {
			return "", false
		}
	}
	return q, true
}

// dequeueArgs is what a dequeue of queue q has at args[3:9], but the
// lease's expiry (index 4), which is left "".
func dequeueArgs(q string) [6]string {
	prefix := "asynq:{" + q + "}:"
	return [6]string{prefix + "pending", prefix + "paused", prefix + "active", prefix + "lease", "", prefix + "t:"}
}

// setDequeue makes args, a dequeue, a dequeue of queue q.
func setDequeue(args []any, q string) {
	for i, v := range dequeueArgs(q) {
		if v != "" {
			args[3+i] = v
		}
	}
}

// queueOfPending is the queue whose pending list key is k.
func queueOfPending(k string) (string, bool) {
	rest, ok := strings.CutPrefix(k, "asynq:{")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "}:pending")
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
