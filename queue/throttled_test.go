package queue_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
)

func TestThrottledError(t *testing.T) {
	err := queue.Throttled(1500*time.Millisecond, "tenant-42 over 10/s")
	assert.Equal(t, "queue: throttled: tenant-42 over 10/s: come back in 1.5s", err.Error())
	assert.True(t, errors.Is(err, queue.ErrThrottled))

	wrapped := fmt.Errorf("send email: %w", err)
	assert.True(t, errors.Is(wrapped, queue.ErrThrottled))
	var te *queue.ThrottledError
	require.True(t, errors.As(wrapped, &te))
	assert.Equal(t, 1500*time.Millisecond, te.RetryAfter)
	assert.Equal(t, "tenant-42 over 10/s", te.Reason)

	assert.Equal(t, "queue: throttled: come back in 2s", queue.Throttled(2*time.Second, "").Error())

	require.True(t, errors.As(queue.Throttled(-time.Second, ""), &te))
	assert.Equal(t, time.Duration(0), te.RetryAfter, "a negative RetryAfter is taken as 0")

	assert.False(t, errors.Is(errors.New("queue: throttled"), queue.ErrThrottled), "only the sentinel matches, not its text")
	assert.False(t, errors.Is(err, errors.New("other")))
}
