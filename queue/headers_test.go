package queue

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetaRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)
	want := Meta{
		Key:            "tenant-42",
		Cost:           7,
		EnqueuedAt:     at,
		ThrottledSince: at.Add(time.Second),
		Slot:           at.Add(2500 * time.Millisecond),
		Ticket:         "0123456789abcdef0123456789abcdef",
		Requeues:       3,
		Origin:         "7f3c-origin",
		Timeout:        90 * time.Second,
		Retention:      time.Hour,
		Deadline:       at.Add(24 * time.Hour),
		Priority:       1,
	}
	h := map[string]string{"trace-id": "abc"}
	want.writeTo(h)
	assert.Equal(t, "abc", h["trace-id"], "other headers are left alone")
	assert.Equal(t, "1772366400123456", h[HeaderEnqueuedAt])
	assert.Equal(t, "1m30s", h[HeaderTimeout])

	got, err := MetaOf(asynq.NewTaskWithHeaders("x", nil, h))
	require.NoError(t, err)
	assert.Equal(t, want.Key, got.Key)
	assert.Equal(t, want.Cost, got.Cost)
	assert.Equal(t, want.Requeues, got.Requeues)
	assert.Equal(t, want.Origin, got.Origin)
	assert.Equal(t, want.Ticket, got.Ticket)
	assert.Equal(t, want.Timeout, got.Timeout)
	assert.Equal(t, want.Retention, got.Retention)
	assert.Equal(t, 1, got.Priority)
	assert.Equal(t, "1", h[HeaderPriority])
	for name, pair := range map[string][2]time.Time{
		"EnqueuedAt":     {want.EnqueuedAt, got.EnqueuedAt},
		"ThrottledSince": {want.ThrottledSince, got.ThrottledSince},
		"Slot":           {want.Slot, got.Slot},
		"Deadline":       {want.Deadline, got.Deadline},
	} {
		assert.True(t, pair[0].Equal(pair[1]), "%s: want %v, got %v", name, pair[0], pair[1])
	}

	// Writing a zero Meta removes every sluice header and nothing else.
	Meta{}.writeTo(h)
	assert.Equal(t, map[string]string{"trace-id": "abc"}, h)
}

func TestMetaOfAbsent(t *testing.T) {
	for i, task := range []*asynq.Task{
		nil,
		asynq.NewTask("x", nil),
		asynq.NewTaskWithHeaders("x", nil, map[string]string{"trace-id": "abc"}),
		asynq.NewTaskWithHeaders("x", nil, map[string]string{HeaderCost: "", HeaderSlot: ""}),
	} {
		m, err := MetaOf(task)
		assert.NoError(t, err, "step %d", i)
		assert.Equal(t, Meta{}, m, "step %d", i)
		assert.Equal(t, DefaultPriority, m.PriorityOr(), "step %d: no header means the default priority", i)
	}
}

func TestMetaOfMalformed(t *testing.T) {
	tests := []struct {
		header, value string
	}{
		{HeaderKey, strings.Repeat("k", MaxKeyLen+1)},
		{HeaderKey, "tenant\n42"},
		{HeaderCost, "two"},
		{HeaderCost, "0"},
		{HeaderCost, "-3"},
		{HeaderCost, "1048577"},
		{HeaderCost, "1.5"},
		{HeaderEnqueuedAt, "yesterday"},
		{HeaderEnqueuedAt, "0"},
		{HeaderEnqueuedAt, "-1"},
		{HeaderThrottledSince, "1.5e15"},
		{HeaderSlot, "2026-03-01T12:00:00Z"},
		{HeaderRequeues, "-1"},
		{HeaderRequeues, "many"},
		{HeaderOrigin, "id\x00"},
		{HeaderTimeout, "90"},
		{HeaderTimeout, "-1s"},
		{HeaderRetention, "forever"},
		{HeaderDeadline, "99999999999999999999"},
		{HeaderPriority, "0"},
		{HeaderPriority, "6"},
		{HeaderPriority, "high"},
	}
	for i, tt := range tests {
		h := map[string]string{tt.header: tt.value, HeaderRequeues: "2"}
		if tt.header == HeaderRequeues {
			h[HeaderCost] = "2"
		}
		m, err := MetaOf(asynq.NewTaskWithHeaders("x", nil, h))
		require.Error(t, err, "step %d: %s=%q", i, tt.header, tt.value)
		assert.True(t, errors.Is(err, ErrBadHeader), "step %d: %v", i, err)
		assert.Contains(t, err.Error(), tt.header, "step %d", i)
		// The well-formed header is still read.
		if tt.header == HeaderRequeues {
			assert.Equal(t, 2, m.Cost, "step %d", i)
		} else {
			assert.Equal(t, 2, m.Requeues, "step %d", i)
		}
	}
}
