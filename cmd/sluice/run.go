package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/throttle"
)

const prog = "sluice"

const usage = `Usage: sluice COMMAND [ARGS] [flags]

Sees and steers a running sluice fleet through the limiter's Redis.

Commands:
  limits                  every limit the fleet uses, one row per named limit: type, spec and its source
                          (flag, file or runtime; a malformed runtime entry, with why), tokens and cooldown left, grants/s
                          over the last minute, jobs waiting in workers, jobs queued
                          in the queues its workers serve (over each queue's family
                          of priorities and lanes; by priority when not all 3),
                          workers applying it; below, per type, what binds it and why
  set 'TYPE=SPEC'...      set a runtime limit, in the --limit grammar of worker; every
                          worker that limits TYPE applies it within a second, over its
                          flags and file, until unset (it says if no live worker limits
                          TYPE). A bad spec is refused and nothing is set; a change
                          is whole, or nothing is changed and it says so. Several
                          specs for one TYPE, each with name=, set its named limits
                          together: sluice set 'T=3000/m,name=requests' 'T=90000/m,name=tokens'
  unset TYPE              remove the runtime limit of TYPE: the workers' own apply again
  inspect KEY             a bucket's state, taking nothing: tokens left, next free
                          slot, time to full, cooldown left
  inspect TYPE            a type the fleet limits (without --type): its buckets, which
                          binds and why, waiting/queued/parked, tenants, its last
                          history steps and latest archived jobs (--json: its bucket's
                          fields, "limits" and "archived")
  reset KEY               empty a bucket's state: it is full again
  cooldown KEY DURATION   grant nothing from a bucket, to any process, for DURATION
                          (positive, at most 720h)
  workers                 each worker process: host, pid, limiter mode, version, limits,
                          jobs waiting, last seen
  dashboard               a live web page of all this, with asynq's queue depths,
                          on --addr; set, unset, reset and cooldown from it need --token

  KEY is a bucket: a type's name for a limit without a key template; for one
  with a template, the key it makes (tenant:acme) with --type TYPE for its policy.

Flags (before or after the arguments):
  --redis URL             the limiter's Redis, as the workers' --limiter-redis
                          (default $SLUICE_REDIS, then $REDIS_URL), in the same forms:
                          redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://, redis-cluster://,
                          redis-sentinel://
  --key-prefix PREFIX     the workers' --key-prefix (default "sluice:")
  --type TYPE             for inspect, reset and cooldown: the type whose policy the
                          bucket has (default: the KEY itself)
  --limit NAME            for inspect, reset and cooldown: the bucket of the type's
                          named limit NAME (default: the type's first limit)
  --json                  for limits, workers and inspect: JSON instead of a table
                          (refused by the other commands, which print text)
  --addr HOST:PORT        for dashboard: where to serve it (default 127.0.0.1:8080)
  --token TOKEN           for dashboard: allows changes to whoever gives it (the page
                          asks for it); without it the page is read-only. At least
                          16 bytes; after a wrong one, its sender waits 1s, doubling
                          with each further one up to 1m. Prefer SLUICE_TOKEN to the
                          flag, which other users may see in ps
  --allow-host NAME       for dashboard: a host name it answers besides --addr's host,
                          localhost, 127.0.0.1 and [::1] (repeatable, or NAME,NAME);
                          a request for any other Host gets 403 (DNS rebinding)
  --tls-cert FILE         for dashboard: serve HTTPS with this PEM certificate
  --tls-key FILE          ...and this PEM key (both or neither). Without them on an
                          address that is not loopback, it warns at start
  --queue-redis URL       for limits and dashboard: the queues' Redis (asynq's, the
                          workers' --redis), if not --redis
  --asynqmon URL          for dashboard and inspect: asynqmon's address (with its root
                          path), to link each archived job to its page there
  --version               print the version and exit

Examples:
  sluice limits --redis redis://127.0.0.1:6379/0
  sluice set 'http:request=20/s,burst=2'
  sluice inspect tenant:acme --type email:send --json
  SLUICE_TOKEN=$(openssl rand -hex 16) sluice dashboard --addr 127.0.0.1:8080

Exit status: 0 done, 1 runtime failure (Redis unreachable), 2 bad usage or input.
`

// options are the flags common to every command.
type options struct {
	redisURL   string
	keyPrefix  string
	typ        string
	limit      string // inspect, reset, cooldown: one of the type's named limits
	json       bool
	addr       string   // dashboard
	token      string   // dashboard: "" is read-only
	queueURL   string   // dashboard: the queues' Redis, if not --redis
	allowHosts hostList // dashboard: Host names to answer besides addr's and loopback's
	tlsCert    string   // dashboard: serve HTTPS with this certificate...
	tlsKey     string   // ...and key
	asynqmon   string   // dashboard, inspect: asynqmon's address, to link archived jobs to
}

// parseArgs parses flags anywhere among the arguments: Go's flag package
// stops at the first argument, so it is called again after each one.
func parseArgs(args []string) (opts options, pos []string, err error) {
	fs := cli.NewFlags(prog)
	fs.StringVar(&opts.redisURL, "redis", "", "")
	fs.StringVar(&opts.keyPrefix, "key-prefix", throttle.DefaultKeyPrefix, "")
	fs.StringVar(&opts.typ, "type", "", "")
	fs.StringVar(&opts.limit, "limit", "", "")
	fs.BoolVar(&opts.json, "json", false, "")
	fs.StringVar(&opts.addr, "addr", "127.0.0.1:8080", "")
	fs.StringVar(&opts.token, "token", "", "")
	fs.StringVar(&opts.queueURL, "queue-redis", "", "")
	fs.Var(&opts.allowHosts, "allow-host", "")
	fs.StringVar(&opts.tlsCert, "tls-cert", "", "")
	fs.StringVar(&opts.tlsKey, "tls-key", "", "")
	fs.StringVar(&opts.asynqmon, "asynqmon", "", "")
	fs.Fallback("redis", "REDIS_URL")
	rest := args
	for {
		for len(rest) > 0 && negative(rest[0]) { // "cooldown KEY -5s": an argument, not a flag
			pos = append(pos, rest[0])
			rest = rest[1:]
		}
		if err := fs.ParseArgs(rest); err != nil {
			return options{}, nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if err := fs.Finish(); err != nil {
		return options{}, nil, err
	}
	return opts, pos, nil
}

// negative reports whether arg is a negative number or duration ("-5s"),
// which parseArgs takes for an argument (to be refused with its own
// message), not a flag.
func negative(arg string) bool {
	return len(arg) > 1 && arg[0] == '-' && (arg[1] >= '0' && arg[1] <= '9' || arg[1] == '.')
}

// command is one subcommand: how many arguments it takes, whether it
// prints JSON with --json, how its arguments and flags are checked before
// Redis is reached (nil: their count only), and what it does.
type command struct {
	args  []string // the names of its arguments, for messages; one ending in "..." may repeat
	json  bool     // --json applies; for another command it is a usage error
	check func(opts options, args []string) error
	run   func(ctx context.Context, f *fleet, opts options, args []string, out io.Writer) error
}

var commands = map[string]command{
	"limits":    {nil, true, nil, cmdLimits},
	"set":       {[]string{"'TYPE=SPEC'..."}, false, nil, cmdSet},
	"unset":     {[]string{"TYPE"}, false, nil, cmdUnset},
	"inspect":   {[]string{"KEY"}, true, checkBucket, cmdInspect},
	"reset":     {[]string{"KEY"}, false, checkBucket, cmdReset},
	"cooldown":  {[]string{"KEY", "DURATION"}, false, checkCooldown, cmdCooldown},
	"workers":   {nil, true, nil, cmdWorkers},
	"dashboard": {nil, false, checkDashboard, cmdDashboard},
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, pos, err := parseArgs(args)
	var cmd command
	switch {
	case err != nil:
	case len(pos) == 0:
		err = cli.Usagef("no command: want limits, set, unset, inspect, reset, cooldown, workers or dashboard")
	default:
		var ok bool
		if cmd, ok = commands[pos[0]]; !ok {
			err = cli.Usagef("unknown command %q: want limits, set, unset, inspect, reset, cooldown, workers or dashboard", pos[0])
		} else if n := len(pos) - 1; n != len(cmd.args) && (n < len(cmd.args) || !repeats(cmd.args)) {
			err = cli.Usagef("%s takes %s", pos[0], describeArgs(cmd.args))
		} else if opts.json && !cmd.json {
			err = cli.Usagef("--json is for limits, workers and inspect; %s prints text", pos[0])
		} else if cmd.check != nil {
			err = cmd.check(opts, pos[1:])
		}
	}
	if code, done := cli.Parsed(err, prog, usage, stdout, stderr); done {
		return code
	}
	f, err := connect(ctx, opts)
	if err != nil {
		return cli.Report(stderr, prog, err)
	}
	defer f.close()
	return cli.Report(stderr, prog, cmd.run(ctx, f, opts, pos[1:], stdout))
}

// repeats reports whether the last of a command's arguments may repeat.
func repeats(names []string) bool {
	return len(names) > 0 && strings.HasSuffix(names[len(names)-1], "...")
}

func describeArgs(names []string) string {
	switch len(names) {
	case 0:
		return "no argument"
	case 1:
		if repeats(names) {
			return "one argument or more, " + names[0]
		}
		return "one argument, " + names[0]
	}
	return fmt.Sprintf("%d arguments, %s", len(names), strings.Join(names, " "))
}

// who names the user and host for the log of a runtime change.
func who() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

// callTimeout bounds the Redis calls of one command.
const callTimeout = 5 * time.Second
