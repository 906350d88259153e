package main

import (
	"bufio"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"time"
)

// lostAck matches asynq's warning when it could not tell Redis what became
// of a task it ran ("Could not remove task id=… from active" after a
// success, "Could not move task id=… to retry" after a failure): it says it
// will retry, but asynq v0.26 retries with the context of the first try,
// cancelled by then (markAsDone and friends defer its cancel since asynq
// PR #926), so no retry succeeds. The task stays active until its lease
// runs out, and asynq's recoverer runs it again a minute or two later.
var lostAck = regexp.MustCompile(`Could not (?:remove|move) task id=([^ ]+)`)

// lostAcks reads the workers' logs and returns, by job id, when asynq lost
// an acknowledgement of one of the job's tasks (a task id is the job's id,
// or its id and "~N" for the N-th send-back's copy).
func lostAcks(logs []string) map[string][]time.Time {
	out := make(map[string][]time.Time)
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			m := lostAck.FindSubmatch(sc.Bytes())
			if m == nil {
				continue
			}
			var line struct{ Time time.Time }
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			id, _, _ := strings.Cut(string(m[1]), "~")
			out[id] = append(out[id], line.Time)
		}
		_ = f.Close()
	}
	return out
}
