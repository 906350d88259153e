package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/httpjob"
	"github.com/sluicehq/sluice/internal/sleepjob"
	"github.com/sluicehq/sluice/queue"
)

const prog = "enqueue"

// maxCount bounds --count.
const maxCount = 10_000_000

const usage = `Usage: enqueue --type TYPE (--payload JSON | --payloads FILE) [--count N] [flags]

Puts tasks on a sluice queue (asynq, in Redis), each stamped with the time it
was enqueued, for sluice workers to run under their limits: N copies of one
payload, or of each payload of an NDJSON file. Every payload is checked before
anything is sent; those of the worker's built-in types (http:request, sleep)
as the worker will read them.

Flags:
  --redis URL         Redis to use (default $REDIS_URL):
                      redis://[USER:PASSWORD@]HOST[:PORT][/DB], or rediss:// for TLS;
                      a Redis Cluster: redis-cluster://HOST:PORT,HOST:PORT,...
                      behind Sentinel: redis-sentinel://HOST:PORT,...[/DB]?master=NAME
                      (USER:PASSWORD@ before the hosts; rediss-... for TLS)
  --type TYPE         task type, e.g. email:send or http:request (required)
  --payload JSON      task payload, a JSON document; for http:request
                      {"url": "...", "method": "POST", "headers": {"K": "V"}, "body": "..."},
                      for sleep {"ms": N}
  --payloads FILE     many payloads, one JSON document per line (NDJSON; blank lines
                      are skipped), "-" for stdin; instead of --payload
  --count N           how many tasks of each payload, 1 to 10000000 in all (default 1)
  --queue Q           asynq queue (default "default")
  --max-retry N       retries after failures (default asynq's, 25); asynq is given
                      one more, kept for recovering a job whose worker died
  --in DURATION       run the tasks no sooner than DURATION from now, e.g. 30s or 5m
  --timeout DURATION  how long one run of a task may take (default asynq's, 30m)
  --deadline TIME     the time by which a task must be done, RFC 3339
                      (2026-12-01T09:00:00Z) or a duration from now (2h); asynq's Deadline
  --unique DURATION   enqueue a task only if no task of the same type, payload and
                      queue was enqueued in the last DURATION (asynq's Unique); the
                      others are counted as duplicates and skipped, not errors
  --key KEY           throttle key carried in the task's sluice-key header, for
                      policies whose key template reads {header.sluice-key}
  --cost N            tokens each task costs (default: the worker's policy)
  --priority N        1 (first) to 5 (last), default 3: among jobs waiting for the
                      same limit, a higher priority is dequeued and granted first
                      (docs/priorities.md); carried in the sluice-priority header
  --envelopes         each line of --payloads is an envelope, not a bare payload:
                      {"payload": JSON, "key": "K", "cost": N, "priority": N}; the
                      fields left out take --key, --cost and --priority
  --quiet             print nothing but errors
  --version           print the version and exit

Environment:
  Every flag may come from SLUICE_<FLAG>, the flag's name in capitals with '_' for
  '-' (SLUICE_MAX_RETRY for --max-retry); a flag given wins over its variable.
  REDIS_URL is read when neither --redis nor SLUICE_REDIS is set.

Examples:
  enqueue --redis redis://127.0.0.1:6379/0 --type http:request --count 1000 \
    --payload '{"url": "https://example.com/hook", "method": "POST", "body": "hi"}'

  jq -c '.[] | {url: .hook}' customers.json | enqueue --type http:request --payloads -

  jq -c '.[] | {payload: {url: .hook}, key: .tenant, priority: .urgency}' customers.json |
    enqueue --type http:request --payloads - --envelopes

Progress goes to stderr and a summary to stdout. Exit status: 0 done, 1 runtime
failure, 2 bad usage or input (nothing was enqueued), 130 interrupted.
`

// config is what the flags ask for, checked.
type config struct {
	redisURL string
	tasks    []queue.Task // one per payload, in order
	count    int          // copies of each
	queue    string
	opts     []asynq.Option
	in       time.Duration
	unique   bool
	quiet    bool
}

// total is how many tasks the run enqueues.
func (c config) total() int { return len(c.tasks) * c.count }

// taskType is the type of every task of the run.
func (c config) taskType() string { return c.tasks[0].Type }

// parseFlags reads and checks args, and the payloads file if any (stdin for
// "-"), before any Redis call. It returns flag.ErrHelp for --help,
// cli.ErrVersion for --version, and errors matching cli.ErrUsage otherwise.
func parseFlags(args []string, stdin io.Reader) (config, error) {
	fs := cli.NewFlags(prog)
	var (
		c                  config
		task               queue.Task
		payload, payloads  string
		deadline           string
		maxRetry           int
		timeout, uniqueFor time.Duration
		envelopes          bool
	)
	fs.StringVar(&c.redisURL, "redis", "", "")
	fs.StringVar(&task.Type, "type", "", "")
	fs.StringVar(&payload, "payload", "", "")
	fs.StringVar(&payloads, "payloads", "", "")
	fs.IntVar(&c.count, "count", 1, "")
	fs.StringVar(&c.queue, "queue", "default", "")
	fs.IntVar(&maxRetry, "max-retry", 0, "")
	fs.DurationVar(&c.in, "in", 0, "")
	fs.DurationVar(&timeout, "timeout", 0, "")
	fs.StringVar(&deadline, "deadline", "", "")
	fs.DurationVar(&uniqueFor, "unique", 0, "")
	fs.StringVar(&task.Key, "key", "", "")
	fs.IntVar(&task.Cost, "cost", 0, "")
	fs.IntVar(&task.Priority, "priority", 0, "")
	fs.BoolVar(&envelopes, "envelopes", false, "")
	fs.BoolVar(&c.quiet, "quiet", false, "")
	fs.Fallback("redis", "REDIS_URL")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if err := fs.NoArgs(); err != nil {
		return config{}, err
	}
	switch {
	case strings.TrimSpace(task.Type) == "":
		return config{}, cli.Usagef("--type is required, e.g. --type email:send")
	case fs.Given("payload") && fs.Given("payloads"):
		return config{}, cli.Usagef("--payload and --payloads both given: one payload, or a file of them")
	case !fs.Given("payload") && !fs.Given("payloads"):
		return config{}, cli.Usagef(`--payload is required: a JSON document, e.g. --payload '{}' (or --payloads FILE)`)
	case fs.Given("payloads") && strings.TrimSpace(payloads) == "":
		return config{}, cli.Usagef(`--payloads is empty: want a file of JSON lines, or "-" for stdin`)
	case c.count < 1 || c.count > maxCount:
		return config{}, cli.Usagef("--count %d is out of range [1, %d]", c.count, maxCount)
	case strings.TrimSpace(c.queue) == "":
		return config{}, cli.Usagef("--queue is empty")
	case queue.Reserved(c.queue):
		return config{}, cli.Usagef("--queue %s is named like a member of a queue's family (QUEUE:pN, QUEUE:pN:lK): name the queue and give --priority", c.queue)
	case fs.Given("max-retry") && maxRetry < 0:
		return config{}, cli.Usagef("--max-retry %d must not be negative", maxRetry)
	case c.in < 0:
		return config{}, cli.Usagef("--in %v must not be negative", c.in)
	case fs.Given("timeout") && timeout <= 0:
		return config{}, cli.Usagef("--timeout %v must be positive", timeout)
	case fs.Given("unique") && uniqueFor < time.Second:
		return config{}, cli.Usagef("--unique %v must be at least 1s (asynq keeps uniqueness in whole seconds)", uniqueFor)
	case task.Cost < 0:
		return config{}, cli.Usagef("--cost %d must not be negative", task.Cost)
	case fs.Given("priority") && (task.Priority < queue.HighestPriority || task.Priority > queue.LowestPriority):
		return config{}, cli.Usagef("--priority %d is out of range: 1 (first) to 5 (last), default 3", task.Priority)
	case envelopes && !fs.Given("payloads"):
		return config{}, cli.Usagef("--envelopes is for the lines of --payloads")
	}
	var due time.Time
	if fs.Given("deadline") {
		var err error
		if due, err = parseDeadline(deadline, time.Now()); err != nil {
			return config{}, err
		}
	}

	var err error
	if fs.Given("payloads") {
		if c.tasks, err = readPayloads(payloads, stdin, task, envelopes); err != nil {
			return config{}, err
		}
		if c.total() > maxCount {
			return config{}, cli.Usagef("%d payloads × --count %d is %d tasks, more than %d", len(c.tasks), c.count, c.total(), maxCount)
		}
	} else {
		if err := checkPayload(task.Type, []byte(payload)); err != nil {
			return config{}, cli.Usagef("--payload %w", err)
		}
		task.Payload = []byte(payload)
		if err := validTask(task); err != nil {
			return config{}, err
		}
		c.tasks = []queue.Task{task}
	}

	c.opts = []asynq.Option{asynq.Queue(c.queue)}
	if fs.Given("max-retry") {
		c.opts = append(c.opts, asynq.MaxRetry(maxRetry))
	}
	if fs.Given("timeout") {
		c.opts = append(c.opts, asynq.Timeout(timeout))
	}
	if fs.Given("deadline") {
		c.opts = append(c.opts, asynq.Deadline(due))
	}
	if fs.Given("unique") {
		c.unique = true
		c.opts = append(c.opts, asynq.Unique(uniqueFor))
	}
	if c.in > 0 {
		c.opts = append(c.opts, asynq.ProcessIn(c.in))
	}
	return c, nil
}

// validTask checks t as queue.Client will, so that a bad task is refused
// before anything is sent.
func validTask(t queue.Task) error {
	if err := t.Validate(); err != nil {
		return cli.Usagef("%s", strings.TrimPrefix(err.Error(), queue.ErrInvalidTask.Error()+": "))
	}
	return nil
}

// parseDeadline reads --deadline: an RFC 3339 time, or a duration from now;
// either must be in the future.
func parseDeadline(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, cli.Usagef("--deadline %v must be in the future", d)
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	switch {
	case err != nil:
		return time.Time{}, cli.Usagef("--deadline %q: want an RFC 3339 time, e.g. 2026-12-01T09:00:00Z, or a duration from now, e.g. 2h", s)
	case !t.After(now):
		return time.Time{}, cli.Usagef("--deadline %s has passed", s)
	}
	return t, nil
}

// checkPayload checks that payload is JSON, and for the built-in types that
// it is a payload their handler will accept. Its error reads after
// "--payload " or "--payloads FILE line N: ".
func checkPayload(taskType string, payload []byte) error {
	var v any
	if err := json.Unmarshal(payload, &v); err != nil {
		return fmt.Errorf("is not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	switch taskType {
	case httpjob.TaskType:
		if _, err := httpjob.ParseRequest(payload); err != nil {
			return fmt.Errorf("is not a valid %s: %s", httpjob.TaskType,
				strings.TrimPrefix(err.Error(), httpjob.ErrBadRequest.Error()+": "))
		}
	case sleepjob.TaskType:
		if _, err := sleepjob.Parse(payload); err != nil {
			return fmt.Errorf("is not a valid %s: %v", sleepjob.TaskType, err)
		}
	}
	return nil
}
