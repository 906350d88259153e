package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary play the worker: the parent starts
// os.Executable, which here is this binary, with "-role worker".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-role" {
		main()
		return
	}
	os.Exit(m.Run())
}

func TestRunParent(t *testing.T) {
	t.Setenv("REDIS_URL", "") // the parent's miniredis
	var out bytes.Buffer
	wf := workerFlags{concurrency: 4, maxWait: time.Second}
	require.NoError(t, runParent(context.Background(), &out, 2, 40, wf), out.String())
	t.Log("\n" + out.String())
	text := out.String()
	assert.Contains(t, text, "40 of 40 done, each once")
	assert.Contains(t, text, `worker-1     pid`)
	assert.Contains(t, text, `worker-2     pid`)
	assert.Contains(t, text, "nothing lost")
}
