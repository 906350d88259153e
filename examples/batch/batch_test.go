package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 5 s")
	}
	t.Setenv("REDIS_URL", "") // miniredis
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out), out.String())
	t.Log("\n" + out.String())
	assert.Contains(t, out.String(), "re-indexed   200 of 200 records")
	assert.Contains(t, out.String(), "lookup, deadline 50ms: refused after")
	assert.Contains(t, out.String(), "(errors.Is ErrLimited: true)")
	assert.Contains(t, out.String(), "lookup, deadline 1s: granted after waiting")
}
