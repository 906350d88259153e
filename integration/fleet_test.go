package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
)

const (
	// startTimeout bounds how long a worker takes to register with asynq.
	startTimeout = 10 * time.Second
	// enqueueTimeout bounds one run of the enqueue command.
	enqueueTimeout = 60 * time.Second
	// keyPrefix is the limiter's key prefix in every test: each test has a
	// Redis of its own, so the prefix only needs to be known to the test.
	keyPrefix = "it:"
)

// startWorker starts the worker command against the queue Redis at redisURL,
// logging JSON at info level, with the key prefix keyPrefix and then args.
func startWorker(tb testing.TB, name, redisURL string, args ...string) *process {
	tb.Helper()
	all := append([]string{
		"--redis", redisURL,
		"--key-prefix", keyPrefix,
		"--log-format", "json",
	}, args...)
	return startProcess(tb, name, bin.worker, all)
}

// startFleet starts n workers with the same arguments and waits until each
// has registered with asynq on srv, so that none misses the start of a run.
func startFleet(tb testing.TB, srv *redistest.Server, insp *asynq.Inspector, n int, args ...string) []*process {
	tb.Helper()
	fleet := make([]*process, n)
	for i := range fleet {
		fleet[i] = startWorker(tb, fmt.Sprintf("worker%d", i+1), srv.URL(), args...)
	}
	waitServers(tb, insp, startTimeout, fleet...)
	return fleet
}

// enqueue runs the enqueue command against redisURL and fails the test unless it succeeds.
func enqueue(tb testing.TB, redisURL string, args ...string) {
	tb.Helper()
	code, out := runCommand(tb, enqueueTimeout, bin.enqueue, append([]string{"--redis", redisURL, "--quiet"}, args...)...)
	if code != 0 {
		tb.Fatalf("enqueue %s: exit status %d\n%s", strings.Join(args, " "), code, out)
	}
}

// enqueueIDs enqueues one http:request job per id, each a GET of the
// upstream's URL for that id, through queue.Client (the enqueue command puts
// copies of one payload, and these jobs must be told apart). opts(id) gives
// each job's asynq options.
func enqueueIDs(tb testing.TB, srv *redistest.Server, up *upstream, ids []string, opts func(id string) []asynq.Option) {
	tb.Helper()
	enqueueKeyed(tb, srv, up, "", ids, opts)
}

// enqueueKeyed is enqueueIDs for jobs of the throttle key key (the
// sluice-key header), each recorded by the upstream in bucket key.
func enqueueKeyed(tb testing.TB, srv *redistest.Server, up *upstream, key string, ids []string, opts func(id string) []asynq.Option) {
	tb.Helper()
	rdb := srv.Client(tb)
	qc := queue.NewClient(asynq.NewClientFromRedisClient(rdb))
	ctx, cancel := context.WithTimeout(context.Background(), enqueueTimeout)
	defer cancel()
	for _, id := range ids {
		var o []asynq.Option
		if opts != nil {
			o = opts(id)
		}
		t := queue.Task{Type: "http:request", Key: key, Payload: []byte(up.Payload(tb, id, key))}
		if _, err := qc.Enqueue(ctx, t, o...); err != nil {
			tb.Fatalf("enqueue job %s: %v", id, err)
		}
	}
}

// jobIDs returns n job ids with the given prefix: prefix-0001, ….
func jobIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%04d", prefix, i+1)
	}
	return ids
}

// finalStats are the counters of a worker's last log line, "worker stopped".
type finalStats struct {
	Processed, Failed, Requeued, Cooldowns, Archived, Waiting int64
	Rates                                                     string
}

func (s finalStats) add(o finalStats) finalStats {
	return finalStats{
		Processed: s.Processed + o.Processed,
		Failed:    s.Failed + o.Failed,
		Requeued:  s.Requeued + o.Requeued,
		Cooldowns: s.Cooldowns + o.Cooldowns,
		Archived:  s.Archived + o.Archived,
		Waiting:   s.Waiting + o.Waiting,
	}
}

// stopWorker sends SIGTERM and waits up to timeout for the worker to exit
// 0, and returns the counters of its "worker stopped" line and how long it
// took to stop.
func stopWorker(tb testing.TB, p *process, timeout time.Duration) (finalStats, time.Duration) {
	tb.Helper()
	start := time.Now()
	p.Signal(syscall.SIGTERM)
	code := p.Wait(timeout)
	took := time.Since(start)
	if code != 0 {
		tb.Fatalf("%s exited with status %d after SIGTERM, want 0", p.name, code)
	}
	return parseFinal(tb, p), took
}

// stopFleet stops every worker at once, as a deploy would, and returns the
// sum of their final counters.
func stopFleet(tb testing.TB, fleet []*process, timeout time.Duration) finalStats {
	tb.Helper()
	for _, p := range fleet {
		p.Signal(syscall.SIGTERM)
	}
	var sum finalStats
	for _, p := range fleet {
		if code := p.Wait(timeout); code != 0 {
			tb.Fatalf("%s exited with status %d after SIGTERM, want 0", p.name, code)
		}
		s := parseFinal(tb, p)
		tb.Logf("%s stopped: processed=%d failed=%d requeued=%d cooldowns=%d archived=%d rates=%q",
			p.name, s.Processed, s.Failed, s.Requeued, s.Cooldowns, s.Archived, s.Rates)
		sum = sum.add(s)
	}
	return sum
}

// parseFinal finds the worker's "worker stopped" line and reads its counters.
func parseFinal(tb testing.TB, p *process) finalStats {
	tb.Helper()
	line, ok := findLog(p, func(e logEntry) bool { return e.Msg == "worker stopped" })
	if !ok {
		tb.Fatalf(`%s wrote no "worker stopped" line`, p.name)
	}
	var s finalStats
	for _, f := range []struct {
		name string
		v    *int64
	}{
		{"processed", &s.Processed}, {"failed", &s.Failed}, {"requeued", &s.Requeued},
		{"cooldowns", &s.Cooldowns}, {"archived", &s.Archived}, {"waiting", &s.Waiting},
	} {
		n, ok := line.Fields[f.name].(float64)
		if !ok {
			tb.Fatalf(`%s: "worker stopped" line has no number %q: %v`, p.name, f.name, line.Fields)
		}
		*f.v = int64(n)
	}
	s.Rates, _ = line.Fields["rates"].(string)
	return s
}

// logEntry is one JSON log line of a worker.
type logEntry struct {
	Time   time.Time
	Level  string
	Msg    string
	Fields map[string]any // every field, msg and level included
}

// logEntries parses the worker's JSON log lines; other lines are skipped.
func logEntries(p *process) []logEntry {
	var out []logEntry
	sc := bufio.NewScanner(strings.NewReader(p.Output()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue
		}
		e := logEntry{Fields: m}
		e.Msg, _ = m["msg"].(string)
		e.Level, _ = m["level"].(string)
		if ts, ok := m["time"].(string); ok {
			e.Time, _ = time.Parse(time.RFC3339Nano, ts)
		}
		out = append(out, e)
	}
	return out
}

// findLog returns the last log entry of p that match accepts.
func findLog(p *process, match func(logEntry) bool) (logEntry, bool) {
	es := logEntries(p)
	for i := len(es) - 1; i >= 0; i-- {
		if match(es[i]) {
			return es[i], true
		}
	}
	return logEntry{}, false
}

// text is the entry's message and every field, for searching.
func (e logEntry) text() string {
	b, _ := json.Marshal(e.Fields)
	return string(b)
}
