// Command enqueue puts jobs on a sluice queue: COUNT copies of one task,
// through queue.Client, so that workers see when each was enqueued.
//
//	enqueue --redis redis://127.0.0.1:6379/0 --type http:request --count 1000 \
//	  --payload '{"url": "https://example.com/hook", "method": "POST", "body": "hi"}'
//
// Run enqueue --help for the flags. It exits 0 when every task is enqueued,
// 1 on a runtime failure (Redis unreachable or going away), 2 on bad usage or
// input, found before anything is sent, and 130 when interrupted (SIGINT or
// SIGTERM), after saying how many tasks it had enqueued; a second signal
// exits at once.
package main

import (
	"context"
	"os"

	"github.com/sluicehq/sluice/internal/cli"
)

func main() {
	cli.Main(prog, "the tasks being enqueued", func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	})
}
