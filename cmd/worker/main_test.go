package main

import (
	"bytes"
	"context"
	"sync"
	"testing"

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
