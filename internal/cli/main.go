package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Main is a command's main function: it runs run with a context that ends
// at the first SIGINT or SIGTERM, so that the command stops gracefully
// (context.Cause says "received interrupt"), and exits with the code run
// returns. A second signal exits at once with ExitInterrupted, after a line
// on stderr that says what is left undone: "exiting without waiting for
// <unfinished>", or "exiting at once" when unfinished is "". go-redis's own
// log is silenced (QuietRedisLog): the commands report Redis errors
// themselves.
func Main(prog, unfinished string, run func(ctx context.Context) int) {
	QuietRedisLog()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancelCause(context.Background())
	go watchSignals(sigs, cancel, os.Stderr, os.Exit, prog, unfinished)
	os.Exit(run(ctx))
}

// watchSignals cancels the run at the first signal and calls exit with
// ExitInterrupted at the second.
func watchSignals(sigs <-chan os.Signal, cancel context.CancelCauseFunc, stderr io.Writer, exit func(int), prog, unfinished string) {
	sig := <-sigs
	cancel(fmt.Errorf("received %v", sig))
	sig = <-sigs
	if unfinished != "" {
		fmt.Fprintf(stderr, "%s: received %v again; exiting without waiting for %s\n", prog, sig, unfinished)
	} else {
		fmt.Fprintf(stderr, "%s: received %v again; exiting at once\n", prog, sig)
	}
	exit(ExitInterrupted)
}
