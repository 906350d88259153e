package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 10 s")
	}
	t.Setenv("REDIS_URL", "") // miniredis
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, time.Second), out.String())
	t.Log("\n" + out.String())
	text := out.String()
	assert.Contains(t, text, "80 of 80 done, 80 successful runs in all")
	assert.Contains(t, text, "nothing lost")
	assert.Contains(t, text, "0 for going over 10/s")

	// Only jobs whose turn was granted before the first 429 can draw one:
	// at most one per worker, 2 hosts × 2.
	m := regexp.MustCompile(`(\d+) in the maintenance window`).FindStringSubmatch(text)
	require.NotNil(t, m)
	n, _ := strconv.Atoi(m[1])
	assert.GreaterOrEqual(t, n, 1, "429s in the window")
	assert.LessOrEqual(t, n, 4, "429s in the window")
}
