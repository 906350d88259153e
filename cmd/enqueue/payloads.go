package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/queue"
)

// maxLine bounds one line of a payloads file, in bytes.
const maxLine = 4 << 20

// readPayloads reads the NDJSON payloads file at path ("-": stdin), one JSON
// document per line, blank lines skipped, and returns a task like base for
// each. With envelopes, each line is an envelope (see envelope) whose
// fields override base's. It reads and checks the whole file before anything is enqueued: a
// bad line is an error that names it, and nothing is sent.
func readPayloads(path string, stdin io.Reader, base queue.Task, envelopes bool) ([]queue.Task, error) {
	name := path
	r := stdin
	if path == "-" {
		name = "stdin"
	} else {
		f, err := os.Open(path)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, cli.Usagef("--payloads %s: %v", path, err)
		}
		defer f.Close()
		r = f
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var tasks []queue.Task
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if len(tasks) == maxCount {
			return nil, cli.Usagef("--payloads %s: more than %d payloads", name, maxCount)
		}
		t := base
		if envelopes {
			var err error
			if t, line, err = openEnvelope(base, line); err != nil {
				return nil, cli.Usagef("--payloads %s line %d: %w", name, n, err)
			}
		}
		if err := checkPayload(base.Type, line); err != nil {
			return nil, cli.Usagef("--payloads %s line %d: payload %w", name, n, err)
		}
		t.Payload = bytes.Clone(line)
		if err := validTask(t); err != nil {
			return nil, cli.Usagef("--payloads %s line %d: %w", name, n, err)
		}
		tasks = append(tasks, t)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, cli.Usagef("--payloads %s: a line longer than %d bytes", name, maxLine)
		}
		return nil, cli.Usagef("--payloads %s: %v", name, err)
	}
	if len(tasks) == 0 {
		return nil, cli.Usagef("--payloads %s holds no payload", name)
	}
	return tasks, nil
}

// String names the payloads of a run for its summary.
func (c config) String() string {
	if len(c.tasks) == 1 {
		return fmt.Sprintf("type %s", c.taskType())
	}
	return fmt.Sprintf("type %s (%d payloads)", c.taskType(), len(c.tasks))
}

// envelope is a line of --payloads under --envelopes: the payload, and the
// task's sluice metadata; a field left out takes its flag's value.
type envelope struct {
	Payload  json.RawMessage `json:"payload"`
	Key      *string         `json:"key"`
	Cost     *int            `json:"cost"`
	Priority *int            `json:"priority"`
}

// openEnvelope reads line as an envelope and returns base with its fields,
// and its payload. Its error reads after "--payloads FILE line N: ".
func openEnvelope(base queue.Task, line []byte) (queue.Task, []byte, error) {
	var e envelope
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return base, nil, fmt.Errorf(`envelope: %s (want {"payload": JSON, "key": "K", "cost": N, "priority": N})`,
			strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return base, nil, errors.New("envelope: more than one JSON document on the line")
	}
	if len(e.Payload) == 0 || string(e.Payload) == "null" {
		return base, nil, errors.New(`envelope: "payload" is missing`)
	}
	t := base
	if e.Key != nil {
		t.Key = *e.Key
	}
	if e.Cost != nil {
		if *e.Cost < 0 {
			return base, nil, fmt.Errorf("envelope: cost %d must not be negative", *e.Cost)
		}
		t.Cost = *e.Cost
	}
	if e.Priority != nil {
		if *e.Priority < queue.HighestPriority || *e.Priority > queue.LowestPriority {
			return base, nil, fmt.Errorf("envelope: priority %d is out of range: 1 (first) to 5 (last)", *e.Priority)
		}
		t.Priority = *e.Priority
	}
	return t, e.Payload, nil
}
