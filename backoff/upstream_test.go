package backoff

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestUpstream(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		retryAfter time.Duration
		said       bool
		attempt    int
		d          time.Duration
		cool, ok   bool
	}{
		{"429 with Retry-After", 429, 3 * time.Second, true, 5, 3 * time.Second, true, true},
		{"503 with Retry-After", 503, 7 * time.Second, true, 0, 7 * time.Second, true, true},
		{"Retry-After 0: come back now", 429, 0, true, 0, 0, true, true},
		{"429 without: 1 s the first time", 429, 0, false, 0, time.Second, true, true},
		{"429 without: doubling", 429, 0, false, 3, 8 * time.Second, true, true},
		{"429 without: at most 5 min", 429, 0, false, 30, 5 * time.Minute, true, true},
		{"503 without: an outage, no cooldown", 503, 0, false, 1, 2 * time.Second, false, true},
		{"500: not a refusal", 500, time.Second, true, 0, 0, false, false},
		{"200: not a refusal", 200, 0, false, 0, 0, false, false},
	}
	for _, tc := range tests {
		d, cool, ok := Upstream(tc.status, tc.retryAfter, tc.said, tc.attempt)
		assert.Equal(t, tc.d, d, tc.name)
		assert.Equal(t, tc.cool, cool, tc.name)
		assert.Equal(t, tc.ok, ok, tc.name)
	}
}
