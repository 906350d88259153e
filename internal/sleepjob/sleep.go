// Package sleepjob is the built-in "sleep" job type, for demos and tests: it
// waits for its payload's milliseconds and succeeds. The worker runs it; the
// enqueue command checks its payloads with Parse.
package sleepjob

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

const (
	// TaskType is the demo job type: it waits, and succeeds.
	TaskType = "sleep"
	// MaxMS bounds a sleep job, in milliseconds: ten minutes.
	MaxMS = 600_000
)

// Parse reads a sleep payload, a JSON object whose "ms" is a whole
// number of milliseconds from 0 to MaxMS. Other fields are ignored, so
// that a key template can read them: {"ms": 50, "tenant": "acme"}.
func Parse(payload []byte) (time.Duration, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(payload, &fields); err != nil || fields == nil {
		return 0, errors.New(`payload is not a JSON object such as {"ms": 100}`)
	}
	raw, ok := fields["ms"]
	if !ok {
		return 0, errors.New(`payload has no "ms", as in {"ms": 100}`)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, fmt.Errorf(`"ms" is %.20s, not a number`, raw)
	}
	n := json.Number(raw) // a number, as json.Unmarshal has checked
	ms, err := n.Int64()
	if err != nil || ms < 0 || ms > MaxMS {
		return 0, fmt.Errorf(`"ms" %s is not a whole number from 0 to %d`, n, MaxMS)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Run runs a sleep job: it waits for the payload's "ms", or until ctx
// ends. A bad payload is archived at once, as retrying cannot mend it.
func Run(ctx context.Context, t *asynq.Task) error {
	d, err := Parse(t.Payload())
	if err != nil {
		return fmt.Errorf("%s: bad payload: %v: %w", TaskType, err, asynq.SkipRetry)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
