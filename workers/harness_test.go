package workers_test

import (
	"github.com/sluicehq/sluice/internal/asynqtest"

	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// harness is a redis-server of the test's own (asynq's queue keys are fixed,
// so pools of different tests must not share one), holding both the queues
// and the buckets, with a queue name and a key prefix no other test uses.
type harness struct {
	srv    *redistest.Server
	rdb    *redis.Client
	qc     *queue.Client
	insp   *asynq.Inspector
	lim    *throttle.Limiter
	prefix string // of lim's keys
	queue  string
}

// newHarness starts the server. At cleanup, after every pool is shut down and
// the server stopped, it checks that no goroutine was left behind.
func newHarness(t *testing.T) *harness {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	prefix := redistest.Prefix(t)
	// Closed at cleanup, after the pools (started later, shut down first):
	// a Hold (in-flight slots, a cold start's claim) subscribes for wakes.
	store := throttle.NewRedisStore(rdb)
	t.Cleanup(func() { _ = store.Close() })
	return &harness{
		srv:    srv,
		rdb:    rdb,
		qc:     queue.NewClient(asynq.NewClientFromRedisClient(rdb)), // shares rdb, which the helper closes
		insp:   asynq.NewInspectorFromRedisClient(rdb),
		lim:    throttle.NewLimiter(store, throttle.WithKeyPrefix(prefix)),
		prefix: prefix,
		queue:  queueName(),
	}
}

func queueName() string { return asynqtest.QueueName() }

// config is a pool configuration for h's queue and limiter, with short
// intervals so that come-backs are prompt.
func (h *harness) config(t *testing.T) workers.Config {
	return workers.Config{
		Redis:                    asynq.RedisClientOpt{Addr: h.srv.Addr()},
		Limiter:                  h.lim,
		Concurrency:              10,
		Queues:                   map[string]int{h.queue: 1},
		DelayedTaskCheckInterval: 100 * time.Millisecond,
		TaskCheckInterval:        50 * time.Millisecond,
		ShutdownTimeout:          2 * time.Second,
		StatusInterval:           50 * time.Millisecond, // a goroutine for Shutdown to end
		Logger:                   slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// start starts p and shuts it down at cleanup.
func start(t *testing.T, p *workers.Pool) {
	t.Helper()
	require.NoError(t, p.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, p.Shutdown(ctx))
	})
}

// enqueue sends a task to h's queue through the sluice client (which stamps
// the enqueue time).
func (h *harness) enqueue(t *testing.T, task queue.Task, opts ...asynq.Option) string {
	t.Helper()
	info, err := h.qc.Enqueue(context.Background(), task, append([]asynq.Option{asynq.Queue(h.queue)}, opts...)...)
	require.NoError(t, err)
	return info.ID
}

// enqueueRaw sends an asynq task with the given headers, as something other
// than a sluice client could.
func (h *harness) enqueueRaw(t *testing.T, task *asynq.Task, opts ...asynq.Option) string {
	t.Helper()
	info, err := asynq.NewClientFromRedisClient(h.rdb).Enqueue(task, append([]asynq.Option{asynq.Queue(h.queue)}, opts...)...)
	require.NoError(t, err)
	return info.ID
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	asynqtest.WaitFor(t, timeout, what, cond)
}

func (h *harness) waitState(t *testing.T, id string, state asynq.TaskState, timeout time.Duration) *asynq.TaskInfo {
	t.Helper()
	return asynqtest.WaitState(t, h.insp, h.queue, id, state, timeout)
}

// queueInfo returns the inspector's counts for h's queue.
func (h *harness) queueInfo(t *testing.T) *asynq.QueueInfo {
	t.Helper()
	info, err := h.insp.GetQueueInfo(h.queue)
	require.NoError(t, err)
	return info
}

func recv[T any](t *testing.T, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	return asynqtest.Recv(t, ch, timeout, what)
}

// ticket issues a ticket for a turn of bucket key at slot, as a pool sending a
// job back would, and returns the headers of a job that holds it.
func (h *harness) ticket(t *testing.T, key string, slot time.Time) map[string]string {
	t.Helper()
	tk, err := h.lim.IssueTicket(context.Background(), key, slot, "")
	require.NoError(t, err)
	return map[string]string{queue.HeaderTicket: tk.ID, queue.HeaderSlot: micros(slot), queue.HeaderRequeues: "1"}
}

// micros formats t as a sluice header time.
func micros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

// logWriter writes a test's log lines through t.Log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}
