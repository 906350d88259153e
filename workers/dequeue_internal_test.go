package workers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/queue"
)

// The chooser takes among the members that may have jobs the highest
// priority, its lanes alike, but for one fetch in 12, the lower
// priorities' (drawn by their weights); under StrictPriority, always the
// highest; none when every member is taken as empty.
func TestChooserDraw(t *testing.T) {
	const draws = 20000
	count := func(h *chooser, asked string) map[string]int {
		n := map[string]int{}
		for range draws {
			m, ok := h.choose(asked)
			if !ok {
				m = "(none)"
			}
			n[m]++
		}
		return n
	}
	onlyBusy := func(h *chooser, busy ...string) {
		for _, m := range queue.Family("q") {
			if !contains(busy, m) {
				h.mark(m)
			}
		}
	}

	h := newChooser(time.Hour, false)
	onlyBusy(h, "q:p1", "q:p5:l2")
	n := count(h, "q:p3:l1") // whichever member asynq asks for
	assert.Len(t, n, 2, "only the members that may have jobs: %v", n)
	assert.Equal(t, draws/lowEvery, n["q:p5:l2"], "priority 5: one fetch in %d: %v", lowEvery, n)

	h = newChooser(time.Hour, false)
	onlyBusy(h, "q:p1", "q:p4", "q:p5")
	n = count(h, "q")
	assert.Equal(t, draws-draws/lowEvery, n["q:p1"], "the highest: %v", n)
	assert.InDelta(t, 2.0/3, float64(n["q:p4"])/float64(draws/lowEvery), 0.05, "the lower ones by weight, 2:1: %v", n)

	h = newChooser(time.Hour, false)
	onlyBusy(h, "q", "q:p3:l1", "q:p3:l3")
	n = count(h, "q:p1")
	for _, m := range []string{"q", "q:p3:l1", "q:p3:l3"} {
		assert.InDelta(t, 1.0/3, float64(n[m])/draws, 0.02, "lanes alike: %v", n)
	}

	h = newChooser(time.Hour, true)
	onlyBusy(h, "q:p2:l1", "q:p2:l2", "q:p4")
	n = count(h, "q")
	assert.Zero(t, n["q:p4"], "strict: never below the highest with jobs")
	assert.InDelta(t, 0.5, float64(n["q:p2:l1"])/draws, 0.02, "strict: its lanes alike: %v", n)

	h.clear("q:p4")
	onlyBusy(h)
	assert.Equal(t, map[string]int{"(none)": draws}, count(h, "q"), "every member taken as empty")
	h.clear("q:p4")
	assert.Equal(t, map[string]int{"q:p4": draws}, count(h, "q"), "a member cleared is taken again")
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// dequeueOf reads asynq's dequeue, and setDequeue turns it into another
// member's; other calls are not dequeues.
func TestDequeueArgs(t *testing.T) {
	args := []any{"evalsha", "abc", 4, "asynq:{q:p1}:pending", "asynq:{q:p1}:paused", "asynq:{q:p1}:active", "asynq:{q:p1}:lease", int64(1700000000), "asynq:{q:p1}:t:"}
	q, ok := dequeueOf(args)
	assert.True(t, ok)
	assert.Equal(t, "q:p1", q)
	setDequeue(args, "q:p5:l2")
	assert.Equal(t, []any{"evalsha", "abc", 4, "asynq:{q:p5:l2}:pending", "asynq:{q:p5:l2}:paused", "asynq:{q:p5:l2}:active", "asynq:{q:p5:l2}:lease", int64(1700000000), "asynq:{q:p5:l2}:t:"}, args)
	for i, bad := range [][]any{
		{"evalsha", "abc", 4, "asynq:{q}:pending", "asynq:{q}:paused", "asynq:{q}:active", "asynq:{other}:lease", int64(1), "asynq:{q}:t:"},
		{"evalsha", "abc", 2, "asynq:{q}:pending", "asynq:{q}:scheduled", int64(1), "x"},
		{"get", "asynq:{q}:pending"},
		{"evalsha", "abc", 4, "asynq:{q}:pending", "asynq:{q}:paused", "asynq:{q}:active", "asynq:{q}:lease", int64(1), "asynq:{q}:t:", "extra"},
	} {
		_, ok := dequeueOf(bad)
		assert.False(t, ok, "case %d", i)
	}
	q, ok = queueOfPending("asynq:{a:b}:pending")
	assert.True(t, ok)
	assert.Equal(t, "a:b", q)
}
