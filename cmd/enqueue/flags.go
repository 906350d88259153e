package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/httpjob"
	"github.com/sluicehq/sluice/queue"
)

const prog = "enqueue"

// maxCount bounds --count.
const maxCount = 10_000_000

const usage = `Usage: enqueue --type TYPE --payload JSON [--count N] [flags]

Puts N copies of a task on a sluice queue (asynq, in Redis), each stamped
with the time it was enqueued, for sluice workers to run under their limits.

Flags:
  --redis URL         Redis to use (default $REDIS_URL):
                      redis://[USER:PASSWORD@]HOST[:PORT][/DB], or rediss:// for TLS;
                      a Redis Cluster: redis-cluster://HOST:PORT,HOST:PORT,...
                      behind Sentinel: redis-sentinel://HOST:PORT,...[/DB]?master=NAME
                      (USER:PASSWORD@ before the hosts; rediss-... for TLS)
  --type TYPE         task type, e.g. email:send or http:request (required)
  --payload JSON      task payload, a JSON document (required); for http:request
                      {"url": "...", "method": "POST", "headers": {"K": "V"}, "body": "..."}
  --count N           how many tasks to enqueue, 1 to 10000000 (default 1)
  --queue Q           asynq queue (default "default")
  --max-retry N       retries after failures (default asynq's, 25); asynq is given
                      one more, kept for recovering a job whose worker died
  --in DURATION       run the tasks no sooner than DURATION from now, e.g. 30s or 5m
  --timeout DURATION  how long one run of a task may take (default asynq's, 30m)
  --key KEY           throttle key carried in the task's sluice-key header, for
                      policies whose key template reads {header.sluice-key}
  --cost N            tokens each task costs (default: the worker's policy)
  --quiet             print nothing but errors

Example:
  enqueue --redis redis://127.0.0.1:6379/0 --type http:request --count 1000 \
    --payload '{"url": "https://example.com/hook", "method": "POST", "body": "hi"}'

Progress goes to stderr and a summary to stdout. Exit status: 0 done, 1 runtime
failure, 2 bad usage or input (nothing was enqueued), 130 interrupted.
`

// config is what the flags ask for, checked.
type config struct {
	redisURL string
	task     queue.Task
	count    int
	queue    string
	opts     []asynq.Option
	in       time.Duration
	quiet    bool
}

// parseFlags reads and checks args, before any Redis call. It returns
// flag.ErrHelp for --help, and errors matching cli.ErrUsage otherwise.
func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var (
		c        config
		payload  string
		maxRetry int
		timeout  time.Duration
	)
	fs.StringVar(&c.redisURL, "redis", "", "")
	fs.StringVar(&c.task.Type, "type", "", "")
	fs.StringVar(&payload, "payload", "", "")
	fs.IntVar(&c.count, "count", 1, "")
	fs.StringVar(&c.queue, "queue", "default", "")
	fs.IntVar(&maxRetry, "max-retry", 0, "")
	fs.DurationVar(&c.in, "in", 0, "")
	fs.DurationVar(&timeout, "timeout", 0, "")
	fs.StringVar(&c.task.Key, "key", "", "")
	fs.IntVar(&c.task.Cost, "cost", 0, "")
	fs.BoolVar(&c.quiet, "quiet", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config{}, err
		}
		return config{}, cli.Usagef("%v", err)
	}
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	switch {
	case fs.NArg() > 0:
		return config{}, cli.Usagef("unexpected argument %q (every option is a --flag)", fs.Arg(0))
	case strings.TrimSpace(c.task.Type) == "":
		return config{}, cli.Usagef("--type is required, e.g. --type email:send")
	case !set["payload"]:
		return config{}, cli.Usagef(`--payload is required: a JSON document, e.g. --payload '{}'`)
	case c.count < 1 || c.count > maxCount:
		return config{}, cli.Usagef("--count %d is out of range [1, %d]", c.count, maxCount)
	case strings.TrimSpace(c.queue) == "":
		return config{}, cli.Usagef("--queue is empty")
	case set["max-retry"] && maxRetry < 0:
		return config{}, cli.Usagef("--max-retry %d must not be negative", maxRetry)
	case c.in < 0:
		return config{}, cli.Usagef("--in %v must not be negative", c.in)
	case set["timeout"] && timeout <= 0:
		return config{}, cli.Usagef("--timeout %v must be positive", timeout)
	case c.task.Cost < 0:
		return config{}, cli.Usagef("--cost %d must not be negative", c.task.Cost)
	}
	if err := checkPayload(c.task.Type, []byte(payload)); err != nil {
		return config{}, err
	}
	c.task.Payload = []byte(payload)
	if err := c.task.Validate(); err != nil {
		return config{}, cli.Usagef("%s", strings.TrimPrefix(err.Error(), queue.ErrInvalidTask.Error()+": "))
	}

	c.opts = []asynq.Option{asynq.Queue(c.queue)}
	if set["max-retry"] {
		c.opts = append(c.opts, asynq.MaxRetry(maxRetry))
	}
	if set["timeout"] {
		c.opts = append(c.opts, asynq.Timeout(timeout))
	}
	if c.in > 0 {
		c.opts = append(c.opts, asynq.ProcessIn(c.in))
	}
	if !set["redis"] {
		c.redisURL = os.Getenv("REDIS_URL")
	}
	return c, nil
}

// checkPayload checks that payload is JSON, and for the built-in
// http:request type that it is a request the handler will accept.
func checkPayload(taskType string, payload []byte) error {
	var v any
	if err := json.Unmarshal(payload, &v); err != nil {
		return cli.Usagef("--payload is not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if taskType == httpjob.TaskType {
		if _, err := httpjob.ParseRequest(payload); err != nil {
			return cli.Usagef("--payload is not a valid %s: %s", httpjob.TaskType,
				strings.TrimPrefix(err.Error(), httpjob.ErrBadRequest.Error()+": "))
		}
	}
	return nil
}

// printUsage writes the usage text to w.
func printUsage(w io.Writer) {
	fmt.Fprint(w, usage)
}
