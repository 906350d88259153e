// Package asynqtest holds small helpers for tests that run real asynq servers.
package asynqtest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/hibiken/asynq"
)

// QueueName returns a queue name no other test uses (asynq's keys are per queue).
func QueueName() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "q-" + hex.EncodeToString(b)
}

// WaitFor polls cond until it holds, failing tb after timeout with what it waited for.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitState polls insp until task id in queue is in state, and returns it.
func WaitState(tb testing.TB, insp *asynq.Inspector, queue, id string, state asynq.TaskState, timeout time.Duration) *asynq.TaskInfo {
	tb.Helper()
	var info *asynq.TaskInfo
	WaitFor(tb, timeout, "task "+id+" to be "+state.String(), func() bool {
		var err error
		info, err = insp.GetTaskInfo(queue, id)
		return err == nil && info.State == state
	})
	return info
}

// Recv waits for one value from ch, failing tb after timeout.
func Recv[T any](tb testing.TB, ch <-chan T, timeout time.Duration, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		panic("unreachable")
	}
}
