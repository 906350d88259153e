package workers_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// TestJobPath runs SLUICE_JOBPATH_JOBS jobs through a pool whose policy
// sends some of them back holding a ticket, and is skipped without it. It
// checks nothing a test elsewhere does not: scripts/jobpath runs it under
// coverage for 1 job and for 11, and the source files whose statement
// counts differ between the two are the files a job passes through.
func TestJobPath(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SLUICE_JOBPATH_JOBS"))
	if n <= 0 {
		t.Skip("set SLUICE_JOBPATH_JOBS (see scripts/jobpath)")
	}
	h := newHarness(t)
	cfg := h.config(t)
	cfg.StatusInterval = 0 // no status goroutine: its ticks would count as the jobs'
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	ran := make(chan struct{}, n)
	p.HandleFunc("job", func(context.Context, *asynq.Task) error {
		ran <- struct{}{}
		return nil
	}, &workers.Policy{Name: "path", Limit: throttle.Limit{Rate: 10, Burst: 1}, MaxWait: 50 * time.Millisecond})
	start(t, p)
	for i := range n {
		h.enqueue(t, queue.Task{Type: "job", Payload: []byte(strconv.Itoa(i))})
	}
	for range n {
		recv(t, ran, 30*time.Second, "a job to run")
	}
}
