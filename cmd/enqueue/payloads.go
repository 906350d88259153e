package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/queue"
)

// maxLine bounds one line of a payloads file, in bytes.
const maxLine = 4 << 20

// readPayloads reads the NDJSON payloads file at path ("-": stdin), one JSON
// document per line, blank lines skipped, and returns a task like base for
// each. It reads and checks the whole file before anything is enqueued: a
// bad line is an error that names it, and nothing is sent.
func readPayloads(path string, stdin io.Reader, base queue.Task) ([]queue.Task, error) {
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
		if err := checkPayload(base.Type, line); err != nil {
			return nil, cli.Usagef("--payloads %s line %d: payload %w", name, n, err)
		}
		t := base
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
