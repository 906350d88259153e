package sleepjob

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSleep(t *testing.T) {
	tests := []struct {
		payload string
		want    time.Duration
		err     string
	}{
		{payload: `{"ms": 0}`, want: 0},
		{payload: `{"ms": 250}`, want: 250 * time.Millisecond},
		{payload: `{"ms": 600000, "tenant": "acme"}`, want: 10 * time.Minute},
		{payload: ` { "ms" : 5 } `, want: 5 * time.Millisecond},
		{payload: ``, err: `payload is not a JSON object such as {"ms": 100}`},
		{payload: `[1]`, err: `payload is not a JSON object such as {"ms": 100}`},
		{payload: `null`, err: `payload is not a JSON object such as {"ms": 100}`},
		{payload: `{"ms": 5`, err: `payload is not a JSON object such as {"ms": 100}`},
		{payload: `{}`, err: `payload has no "ms", as in {"ms": 100}`},
		{payload: `{"ms": "5"}`, err: `"ms" is "5", not a number`},
		{payload: `{"ms": null}`, err: `"ms" is null, not a number`},
		{payload: `{"ms": 1.5}`, err: `"ms" 1.5 is not a whole number from 0 to 600000`},
		{payload: `{"ms": -1}`, err: `"ms" -1 is not a whole number from 0 to 600000`},
		{payload: `{"ms": 600001}`, err: `"ms" 600001 is not a whole number from 0 to 600000`},
		{payload: `{"ms": 1e3}`, err: `"ms" 1e3 is not a whole number from 0 to 600000`},
	}
	for i, tt := range tests {
		got, err := Parse([]byte(tt.payload))
		if tt.err != "" {
			assert.EqualError(t, err, tt.err, "%d: %s", i, tt.payload)
			continue
		}
		require.NoError(t, err, "%d: %s", i, tt.payload)
		assert.Equal(t, tt.want, got, "%d: %s", i, tt.payload)
	}
}

func TestSleepJob(t *testing.T) {
	start := time.Now()
	require.NoError(t, Run(context.Background(), asynq.NewTask(TaskType, []byte(`{"ms": 30}`))))
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)

	err := Run(context.Background(), asynq.NewTask(TaskType, []byte(`{"ms": "x"}`)))
	assert.ErrorIs(t, err, asynq.SkipRetry, "a bad payload is archived at once")
	assert.EqualError(t, err, `sleep: bad payload: "ms" is "x", not a number: skip retry for the task`)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	err = Run(ctx, asynq.NewTask(TaskType, []byte(`{"ms": 60000}`)))
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Less(t, time.Since(start), 5*time.Second)
}
