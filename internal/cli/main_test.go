package cli

import (
	"bytes"
	"context"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// syncBuffer is a bytes.Buffer that watchSignals may write while the test
// reads it.
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

// The first signal cancels the run with its cause; the second exits at
// once with ExitInterrupted, saying what is left undone.
func TestWatchSignals(t *testing.T) {
	for _, tt := range []struct {
		unfinished, want string
	}{
		{"running jobs", "worker: received interrupt again; exiting without waiting for running jobs\n"},
		{"", "worker: received interrupt again; exiting at once\n"},
	} {
		sigs := make(chan os.Signal, 2)
		ctx, cancel := context.WithCancelCause(context.Background())
		exited := make(chan int, 1)
		var stderr syncBuffer
		go watchSignals(sigs, cancel, &stderr, func(code int) { exited <- code }, "worker", tt.unfinished)

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
			assert.Equal(t, ExitInterrupted, code)
		case <-time.After(5 * time.Second):
			t.Fatal("the second signal did not exit")
		}
		assert.Equal(t, tt.want, stderr.String())
		cancel(nil)
	}
}
