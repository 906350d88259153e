package main

import (
	"bytes"
	"context"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redistest"
)

func TestMain(m *testing.M) {
	cli.QuietRedisLog() // as main does
	redistest.Main(m)
}

// result is what one run of the command did.
type result struct {
	code           int
	stdout, stderr string
}

func runArgs(ctx context.Context, args ...string) result {
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// syncBuffer is a bytes.Buffer that a running worker may write while the
// test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestWatchSignals(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	exited := make(chan int, 1)
	var stderr syncBuffer
	go watchSignals(sigs, cancel, &stderr, func(code int) { exited <- code })

	sigs <- syscall.SIGTERM
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first signal did not cancel the run")
	}
	assert.Equal(t, "received terminated", context.Cause(ctx).Error())
	select {
	case code := <-exited:
		t.Fatalf("exited with %d after one signal", code)
	case <-time.After(50 * time.Millisecond):
	}

	sigs <- os.Interrupt
	select {
	case code := <-exited:
		assert.Equal(t, cli.ExitInterrupted, code)
	case <-time.After(5 * time.Second):
		t.Fatal("the second signal did not exit")
	}
	assert.Equal(t, "worker: received interrupt again; exiting without waiting for running jobs\n", stderr.String())
}
