package queue_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/queue"
)

func TestTaskValidate(t *testing.T) {
	tests := []struct {
		name string
		task queue.Task
		ok   bool
	}{
		{"minimal", queue.Task{Type: "email:send"}, true},
		{"everything set", queue.Task{Type: "email:send", Payload: []byte("{}"), Key: "tenant-42", Cost: 3, Headers: map[string]string{"trace-id": "abc"}}, true},
		{"empty type", queue.Task{}, false},
		{"blank type", queue.Task{Type: "  \t"}, false},
		{"type at limit", queue.Task{Type: strings.Repeat("t", queue.MaxTypeLen)}, true},
		{"type too long", queue.Task{Type: strings.Repeat("t", queue.MaxTypeLen+1)}, false},
		{"type with newline", queue.Task{Type: "email\nsend"}, false},
		{"type with DEL", queue.Task{Type: "email\x7fsend"}, false},
		{"unicode type", queue.Task{Type: "courriel:envoyé"}, true},
		{"key at limit", queue.Task{Type: "x", Key: strings.Repeat("k", queue.MaxKeyLen)}, true},
		{"key too long", queue.Task{Type: "x", Key: strings.Repeat("k", queue.MaxKeyLen+1)}, false},
		{"key with NUL", queue.Task{Type: "x", Key: "tenant\x00"}, false},
		{"zero cost", queue.Task{Type: "x", Cost: 0}, true},
		{"negative cost", queue.Task{Type: "x", Cost: -1}, false},
		{"cost at limit", queue.Task{Type: "x", Cost: queue.MaxCost}, true},
		{"cost too high", queue.Task{Type: "x", Cost: queue.MaxCost + 1}, false},
		{"payload at limit", queue.Task{Type: "x", Payload: make([]byte, queue.MaxPayload)}, true},
		{"payload too large", queue.Task{Type: "x", Payload: make([]byte, queue.MaxPayload+1)}, false},
		{"reserved header", queue.Task{Type: "x", Headers: map[string]string{queue.HeaderCost: "5"}}, false},
		{"reserved header, other case", queue.Task{Type: "x", Headers: map[string]string{"Sluice-Whatever": "1"}}, false},
		{"header that only mentions sluice", queue.Task{Type: "x", Headers: map[string]string{"x-sluice-key": "1"}}, true},
	}
	for i, tt := range tests {
		err := tt.task.Validate()
		if tt.ok {
			assert.NoError(t, err, "step %d: %s", i, tt.name)
			continue
		}
		assert.True(t, errors.Is(err, queue.ErrInvalidTask), "step %d: %s: got %v", i, tt.name, err)
	}
}
