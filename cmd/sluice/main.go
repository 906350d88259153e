// Command sluice sees and steers a running sluice fleet through the limiter's
// Redis: the limits the workers apply and where they come from, runtime
// limits that override the workers' flags and files until unset, a bucket's
// state, and the worker processes' heartbeats.
//
//	sluice limits                       # every limit the fleet uses
//	sluice set 'http:request=20/s'      # every worker limiting it applies it within a second
//	sluice unset http:request
//	sluice inspect http:request
//	sluice cooldown http:request 30s
//	sluice workers --json
//
// Run sluice --help for the commands and flags. SIGINT or SIGTERM stops it
// (the dashboard gracefully); a second signal exits at once with status 130.
package main

import (
	"context"
	"os"

	"github.com/sluicehq/sluice/internal/cli"
)

func main() {
	cli.Main(prog, "", func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	})
}
